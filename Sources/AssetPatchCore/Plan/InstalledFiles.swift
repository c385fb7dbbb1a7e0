/// A file of an installed release that a new one may take: its release's directory for its
/// group (one String for all of them) and its path there, both shared with what the store
/// read, so that 100,000 of them cost no path of their own.
struct InstalledFile: Equatable {
    /// Root `<release>/files/` or `<release>/groups/<name>/`.
    let place: FilePlace
    let size: UInt64

    init(root: String, path: String, size: UInt64) {
        place = FilePlace(root: root, path: path)
        self.size = size
    }
}

/// The files of the installed releases by digest, the first given for a digest kept: the
/// files in the order given, and their digests sorted beside their places (plain words, so
/// sorting 100,000 moves no String), searched by halves. At 100,000 files a dictionary's
/// buckets were 19 MB (its capacity a power of two past 4/3 of the count); these are 8 MB.
struct InstalledFiles {
    private var files: [InstalledFile] = []
    private var order: [(digest: Sha256, file: UInt32)] = []
    /// `order[..<sealed]` is sorted and searched; what was appended after it is not yet.
    private var sealed = 0
    /// The groups of the last files appended, which wait for their roots (`appendPending`).
    private var pendingGroups: [UInt16] = []

    init() {}

    var count: Int { order.count }

    mutating func reserveCapacity(_ n: Int) {
        files.reserveCapacity(n)
        order.reserveCapacity(n)
    }

    /// Adds `file` as content `digest`, unless a sealed digest is the same (`seal` drops the
    /// later of equal digests appended since): a release kept for rollback shares most of
    /// the active one's files and adds no entry for them.
    @discardableResult
    mutating func append(_ digest: Sha256, _ file: InstalledFile) -> Bool {
        guard self[digest] == nil else { return false }
        order.append((digest, UInt32(files.count)))
        files.append(file)
        return true
    }

    /// Adds `file` of group number `group`, its root not yet known (the record names its groups
    /// after its files): `placePending` gives it, before `seal`.
    mutating func appendPending(_ digest: Sha256, _ file: InstalledFile, group: UInt16) {
        if append(digest, file) { pendingGroups.append(group) }
    }

    /// Gives each file appended pending its root, `root(its group)`, or drops it where that is
    /// nil (a group not on disk, a record that turned out bad).
    mutating func placePending(_ root: (UInt16) -> String?) {
        let first = files.count - pendingGroups.count
        var kept = first
        for i in first..<files.count {
            guard let r = root(pendingGroups[i - first]) else { continue }
            files[kept] = InstalledFile(root: r, path: files[i].place.path, size: files[i].size)
            order[sealed + kept - first] = (order[sealed + i - first].digest, UInt32(kept))
            kept += 1
        }
        files.removeLast(files.count - kept)
        order.removeLast(order.count - (sealed + kept - first))
        pendingGroups = []
    }

    /// Orders the digests appended for lookups; of equal digests, the first appended stays.
    mutating func seal() {
        guard sealed < order.count else { return }
        // Stable: of equal digests the first appended comes first, and the rest go.
        order.sort { $0.digest < $1.digest }
        var kept = 0
        for i in order.indices where kept == 0 || order[i].digest != order[kept - 1].digest {
            order[kept] = order[i]
            kept += 1
        }
        order.removeLast(order.count - kept)
        sealed = order.count
    }

    /// The file of content `digest`, among those sealed.
    subscript(_ digest: Sha256) -> InstalledFile? {
        var low = 0
        var high = sealed
        while low < high {
            let mid = (low + high) / 2
            if order[mid].digest < digest { low = mid + 1 } else { high = mid }
        }
        return low < sealed && order[low].digest == digest ? files[Int(order[low].file)] : nil
    }

    static let empty = InstalledFiles()
}
