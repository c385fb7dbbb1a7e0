/// The files a plan places and where each comes from, in the order of the list the plan was
/// made from (`release`, shared with the manifest, not copied): each held as its number in that
/// list and its origin. A copied file entry beside its origin was 136 bytes, 13.6 MB of an
/// update's memory at 100,000 files; an entry here is 48.
struct PlannedFiles: RandomAccessCollection {
    /// The list the plan was made from.
    let release: [ManifestFile]
    private var entries: [Entry] = []

    private struct Entry {
        let source: FileOrigin
        let file: UInt32
    }

    init(release: [ManifestFile]) {
        self.release = release
    }

    /// Files with their origins, each its own entry of `release`.
    init(_ list: [(file: ManifestFile, source: FileOrigin)]) {
        release = list.map(\.file)
        entries = list.indices.map { Entry(source: list[$0].source, file: UInt32($0)) }
    }

    /// Adds file number `index` of `release`, from `source`.
    mutating func append(_ index: Int, _ source: FileOrigin) {
        entries.append(Entry(source: source, file: UInt32(index)))
    }

    mutating func reserveCapacity(_ n: Int) { entries.reserveCapacity(n) }

    var startIndex: Int { 0 }
    var endIndex: Int { entries.count }

    subscript(i: Int) -> (file: ManifestFile, source: FileOrigin) {
        (release[Int(entries[i].file)], entries[i].source)
    }

    /// The number in `release` of the `i`th file.
    func releaseIndex(_ i: Int) -> Int { Int(entries[i].file) }
}
