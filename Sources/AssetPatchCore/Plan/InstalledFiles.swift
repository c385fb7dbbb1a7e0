/// A file of an installed release that a new one may take: its release's directory for its
/// group (one String for all of them) and its path there, both shared with what the store
/// read, so that 100,000 of them cost no path of their own.
struct InstalledFile: Equatable {
    /// `<release>/files/` or `<release>/groups/<name>/`.
    let root: String
    let path: String
    let size: UInt64

    var fullPath: String { root + path }
}

/// The files of the installed releases by digest, the first given for a digest kept: a sorted
/// array searched by halves. At 100,000 files a dictionary's buckets were 19 MB (its capacity
/// a power of two past 4/3 of the count); this is the entries alone, 7 MB.
struct InstalledFiles {
    private var entries: [(digest: Sha256, file: InstalledFile)] = []
    private var sorted = true

    init() {}

    var count: Int { entries.count }

    mutating func reserveCapacity(_ n: Int) { entries.reserveCapacity(n) }

    /// Adds `file` as content `digest`; a digest added before keeps its file (`seal` drops
    /// the later ones).
    mutating func append(_ digest: Sha256, _ file: InstalledFile) {
        if let last = entries.last, !(last.digest < digest) { sorted = false }
        entries.append((digest, file))
    }

    /// Orders the entries for lookups; of equal digests, the first appended stays.
    mutating func seal() {
        guard !sorted else { return }
        // Stable: of equal digests the first appended comes first, and the rest go.
        entries.sort { $0.digest < $1.digest }
        var kept = 0
        for i in entries.indices where kept == 0 || entries[i].digest != entries[kept - 1].digest {
            entries.swapAt(kept, i)
            kept += 1
        }
        entries.removeLast(entries.count - kept)
        sorted = true
    }

    subscript(_ digest: Sha256) -> InstalledFile? {
        precondition(sorted, "InstalledFiles looked up before seal()")
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].digest < digest { low = mid + 1 } else { high = mid }
        }
        return low < entries.count && entries[low].digest == digest ? entries[low].file : nil
    }

    static let empty = InstalledFiles()
}
