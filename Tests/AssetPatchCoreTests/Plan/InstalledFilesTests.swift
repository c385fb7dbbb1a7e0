import Testing
@testable import AssetPatchCore

@Suite struct InstalledFilesTests {
    /// Digests that differ in the high word as well as the low one.
    private func digest(_ i: Int) -> Sha256 {
        Sha256(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 == 31 ? i : $0 == 30 ? i >> 8 : ($0 * 31 + i * 17) % 256) })!
    }

    @Test func theFirstReleaseGivenForADigestIsTheOneTaken() {
        var files = InstalledFiles()
        // The active release first, then a kept one holding the same contents and some others,
        // given in no order.
        for i in stride(from: 999, through: 0, by: -3) { files.append(digest(i), InstalledFile(root: "/active/", path: "f\(i)", size: UInt64(i))) }
        // Not found before it is sealed; a release listing a content twice keeps the first.
        #expect(files[digest(999)] == nil)
        files.append(digest(999), InstalledFile(root: "/active/", path: "again", size: 999))
        files.seal()
        #expect(files.count == 334)
        for i in 0..<1000 { files.append(digest(i), InstalledFile(root: "/kept/", path: "f\(i)", size: UInt64(i))) }
        #expect(files.count == 1000, "the kept release added its own contents only")
        files.seal()
        #expect(files.count == 1000)
        for i in 0..<1000 {
            #expect(files[digest(i)] == InstalledFile(root: i % 3 == 0 ? "/active/" : "/kept/", path: "f\(i)", size: UInt64(i)))
        }
        #expect(files[digest(1000)] == nil && files[digest(-1)] == nil)
        #expect(InstalledFiles.empty[digest(0)] == nil)
    }

    @Test func filesAppendedPendingTakeTheirRootsOrAreDropped() {
        var files = InstalledFiles()
        files.append(digest(0), InstalledFile(root: "/a/files/", path: "zero", size: 0))
        files.seal()
        // A record's files arrive before its groups: group 1 lies under its own root, group 2
        // is not on disk. The content of file 0 is the active release's already.
        for i in 0..<30 { files.appendPending(digest(i), InstalledFile(root: "", path: "p\(i)", size: UInt64(i)), group: UInt16(i % 3)) }
        #expect(files[digest(1)] == nil, "found before it was placed and sealed")
        files.placePending { [0: "/k/files/", 1: "/k/groups/hd/"][$0] }
        files.seal()
        #expect(files[digest(0)] == InstalledFile(root: "/a/files/", path: "zero", size: 0))
        for i in 1..<30 {
            let expected = i % 3 == 2 ? nil : InstalledFile(root: i % 3 == 0 ? "/k/files/" : "/k/groups/hd/", path: "p\(i)", size: UInt64(i))
            #expect(files[digest(i)] == expected, "\(i)")
        }
        #expect(files.count == 1 + 19)
        // A record that turned out bad: all of its files go.
        for i in 30..<40 { files.appendPending(digest(i), InstalledFile(root: "", path: "q\(i)", size: 1), group: 0) }
        files.placePending { _ in nil }
        files.seal()
        #expect(files.count == 20 && (30..<40).allSatisfy { files[digest($0)] == nil })
    }

    @Test func theStoreTakesEachRecordsFilesWhereTheyLieSharingTheNewPaths() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let store = try Store(root: dir.path + "/data")
        func sha(_ i: Int) -> String { String(repeating: Hex.encode([UInt8(i)]), count: 32) }
        // Paths too long to be stored inline in a String.
        let files = (0..<6).map { ManifestFile(path: "dir/long-file-name-\($0).png", size: UInt64($0), sha256: sha($0), group: UInt16($0 % 3)) }
        var record = ReleaseRecord(version: 2, files: files, plugins: [], signatureVerified: true, archiveDigest: sha(9), label: nil)
        record.groups = [ReleaseGroup(name: "hd", delivery: .onDemand, files: 2, size: 5, storedBytes: 5),
                         ReleaseGroup(name: "lo", delivery: .onDemand, files: 2, size: 7, storedBytes: 7)]
        let id = "2-0123456789abcdef"
        try FS.makeDirectories(store.releaseDir(id))
        var text: [UInt8] = []
        record.serialize { text += $0.utf8 }
        try FS.writeAtomically(store.releaseRecordPath(id), text)
        var state = StoreState()
        state.active = ReleaseRef(id: id, version: 2, verified: true)
        state.groups.local[id] = ["hd"]
        // The new release names three of these paths again (and one the record lacks).
        let new = [0, 1, 15, 3].map { ManifestFile(path: String(decoding: Array("dir/long-file-name-\($0).png".utf8), as: UTF8.self), size: 0, sha256: sha(0)) }
        let installed = store.installedFiles(state, sharing: new)
        let root = store.releaseDir(id) + "/"
        for f in files {
            let place = f.group == 2 ? nil : f.group == 1 ? root + "groups/hd/" + f.path : root + "files/" + f.path
            #expect(installed[f.digest]?.place.full == place, "\(f.path)")
        }
        // Shared with the new release's Strings, not copied (one that sorts between them too).
        func storage(_ s: String) -> UnsafePointer<UInt8>? { s.utf8.withContiguousStorageIfAvailable { $0.baseAddress } ?? nil }
        for (n, i) in [(0, 0), (1, 1), (3, 3)] {
            #expect(storage(installed[files[i].digest]!.place.path) == storage(new[n == 3 ? 3 : n].path), "\(i)")
            #expect(storage(installed[files[i].digest]!.place.path) != nil)
        }
        #expect(storage(installed[files[4].digest]!.place.path) != storage(new[3].path))
        // A record that does not decode gives none of its files.
        try FS.writeAtomically(store.releaseRecordPath(id), Array(text.dropLast(30)))
        #expect(store.installedFiles(state, sharing: new).count == 0)
    }
}
