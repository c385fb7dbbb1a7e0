extension NameTable {
    /// The roots of a release's table: `<dir>/files` first, then one per group in group order
    /// (an on-demand group's own directory, `files` again for an install group), so that an
    /// entry's root index is its file's group number.
    static func releaseRoots(_ dir: String, _ groups: [ReleaseGroup]) -> [String] {
        [dir + "/files"] + groups.map { $0.delivery == .onDemand ? dir + "/groups/" + $0.name : dir + "/files" }
    }

    /// A release's table from its files (with their group numbers) and groups; `excluding`:
    /// names left out (the bundle serves them).
    package convenience init(releaseDir dir: String, files: [ManifestFile], groups: [ReleaseGroup], excluding: Set<String> = []) {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(files.count)
        for f in files {
            let start = bytes.count
            bytes += f.path.utf8
            ranges.append(start..<bytes.count)
        }
        self.init(root: dir + "/files", bytes: bytes, ranges: ranges, roots: NameTable.releaseRoots(dir, groups),
                  rootOf: { excluding.contains(files[$0].path) ? -1 : Int(files[$0].group) })
    }

    /// A release's table from its names file and group table (nil: no groups); nil when a name
    /// is invalid or the table does not cover the names.
    package convenience init?(releaseDir dir: String, nulSeparated bytes: [UInt8], groups: GroupTable?, excluding: Set<String> = []) {
        guard let groups else {
            self.init(root: dir + "/files", nulSeparated: bytes)
            return
        }
        guard bytes.reduce(0, { $0 + ($1 == 0 ? 1 : 0) }) == groups.fileGroups.count else { return nil }
        let fileGroups = groups.fileGroups
        var names: [String] = []
        if !excluding.isEmpty { names = bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) } }
        self.init(root: dir + "/files", nulSeparated: bytes, roots: NameTable.releaseRoots(dir, groups.groups),
                  rootOf: { !names.isEmpty && excluding.contains(names[$0]) ? -1 : Int(fileGroups[$0]) })
    }
}
