import Testing
@testable import AssetPatchCore

@Suite struct InstalledFilesTests {
    /// Digests that differ in the high word as well as the low one.
    private func digest(_ i: Int) -> Sha256 {
        Sha256(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 == 31 ? i : $0 == 30 ? i >> 8 : ($0 * 31 + i * 17) % 256) })!
    }

    @Test func aPathIsFoundByItsNumberInAListInByteOrder() {
        // Byte order: "a" < "a/b" < "a0" < "b" < "é" (0xC3 0xA9); none is found that is not listed.
        let paths = ["a", "a/b", "a0", "b", "\u{E9}"]
        let files = paths.map { ManifestFile(path: $0, size: 1, sha256: String(repeating: "0", count: 64)) }
        for (i, p) in paths.enumerated() { #expect(InstalledFiles.number(of: p, in: files) == i, "\(p)") }
        for p in ["", "a/", "a/c", "0", "c", "e\u{301}", "\u{E9}x"] { #expect(InstalledFiles.number(of: p, in: files) == nil, "\(p)") }
        #expect(InstalledFiles.number(of: "a", in: []) == nil)
        // One file, and exact multiples of the halving.
        let name = { (i: Int) in "f" + String(String(100_000 + i).dropFirst()) }  // f00000, f00001...
        for n in [1, 2, 4, 8, 1024, 1025] {
            let many = (0..<n).map { ManifestFile(path: name($0), size: 1, sha256: String(repeating: "0", count: 64)) }
            #expect((0..<n).allSatisfy { InstalledFiles.number(of: name($0), in: many) == $0 }, "\(n)")
            #expect(InstalledFiles.number(of: "f99999", in: many) == nil && InstalledFiles.number(of: "e", in: many) == nil)
        }
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

    /// A new file is found at its own path in the first release that has its content there
    /// (a kept release where the active one changed it), else by digest, never with another
    /// size; a content found in place is found by digest too once every record is read.
    @Test func newFilesAreFoundInPlaceThenByDigest() {
        let new = [ManifestFile(path: "a", size: 1, digest: digest(1)), ManifestFile(path: "b", size: 2, digest: digest(2)),
                   ManifestFile(path: "c", size: 3, digest: digest(3)), ManifestFile(path: "d", size: 1, digest: digest(1)),
                   ManifestFile(path: "e", size: 4, digest: digest(4))]
        var files = InstalledFiles(sharing: new)
        // The active release: "a" as the new one, "b" with other content, "x" with e's.
        files.appendPending(digest(1), InstalledFile(root: "", path: "a", size: 1), group: 0, sharingIndex: 0)
        files.appendPending(digest(9), InstalledFile(root: "", path: "b", size: 9), group: 0, sharingIndex: 1)
        files.appendPending(digest(4), InstalledFile(root: "", path: "x", size: 4), group: 0)
        #expect(files[new[0]] == nil, "found before it was placed")
        files.placePending { _ in "/active/" }
        files.seal()
        // A kept release: "a" again, "b" as the new one, "c" in a group not on disk.
        files.appendPending(digest(1), InstalledFile(root: "", path: "a", size: 1), group: 0, sharingIndex: 0)
        files.appendPending(digest(2), InstalledFile(root: "", path: "b", size: 2), group: 0, sharingIndex: 1)
        files.appendPending(digest(3), InstalledFile(root: "", path: "c", size: 3), group: 1, sharingIndex: 2)
        files.placePending { $0 == 0 ? "/kept/" : nil }
        files.seal()
        #expect(files[new[3]] == nil, "a copy is found by digest once every record is read")
        files.finish()
        #expect(files[new[0]] == InstalledFile(root: "/active/", path: "a", size: 1))
        #expect(files[new[1]] == InstalledFile(root: "/kept/", path: "b", size: 2))
        #expect(files[new[2]] == nil)
        #expect(files[new[3]] == InstalledFile(root: "/active/", path: "a", size: 1))
        #expect(files[new[4]] == InstalledFile(root: "/active/", path: "x", size: 4))
        #expect(files[ManifestFile(path: "a", size: 5, digest: digest(1))] == nil, "same digest, another size")
        #expect(files.foundInPlace == 2 && files.count == 3)
        // New files out of path order (a format-1 manifest's may be) are all found by digest.
        var unordered = InstalledFiles(sharing: [new[2], new[0]])
        unordered.appendPending(digest(1), InstalledFile(root: "", path: "a", size: 1), group: 0)
        unordered.appendPending(digest(3), InstalledFile(root: "", path: "c", size: 3), group: 0, sharingIndex: 0)
        unordered.placePending { _ in "/active/" }
        unordered.finish()
        #expect(unordered[new[0]] == InstalledFile(root: "/active/", path: "a", size: 1) && unordered.foundInPlace == 0)
        #expect(unordered[new[2]] == InstalledFile(root: "/active/", path: "c", size: 3))
    }

    /// Past the roots a number holds (only a damaged record lists so many groups), files found
    /// in place are kept by digest instead, not dropped.
    @Test func pastTheRootsANumberHoldsFilesGoByDigest() {
        let n = Int(UInt16.max) + 1
        let new = (0..<n).map { i in
            let digits = String(i)
            return ManifestFile(path: "f" + String(repeating: "0", count: 6 - digits.count) + digits, size: 1, digest: digest(i))
        }
        var files = InstalledFiles(sharing: new)
        for i in 0..<n { files.appendPending(digest(i), InstalledFile(root: "", path: new[i].path, size: 1), group: UInt16(i), sharingIndex: i) }
        files.placePending { "/g\($0)/" }
        files.finish()
        #expect(files.foundInPlace == Int(UInt16.max) - 1 && files.count == 2)
        #expect(new.indices.allSatisfy { files[new[$0]]?.place.full == "/g\($0)/" + new[$0].path })
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
        record.serialize { text += $0 }
        try FS.writeAtomically(store.releaseRecordPath(id), text)
        var state = StoreState()
        state.active = ReleaseRef(id: id, version: 2, verified: true)
        state.groups.local[id] = ["hd"]
        // The new release, in path order: files 0 and 1 again (1 in group "hd", on disk), file
        // 4's content under a new path, file 2 again (group "lo", not on disk), file 3's path
        // with other content, and file 0's content a second time.
        func path(_ name: String) -> String { String(decoding: Array("dir/\(name)".utf8), as: UTF8.self) }
        let new = [ManifestFile(path: path("long-file-name-0.png"), size: 0, sha256: sha(0)),
                   ManifestFile(path: path("long-file-name-1.png"), size: 1, sha256: sha(1)),
                   ManifestFile(path: path("long-file-name-15.png"), size: 4, sha256: sha(4)),
                   ManifestFile(path: path("long-file-name-2.png"), size: 2, sha256: sha(2)),
                   ManifestFile(path: path("long-file-name-3.png"), size: 9, sha256: sha(9)),
                   ManifestFile(path: path("zz-copy-of-file-0.png"), size: 0, sha256: sha(0))]
        let installed = store.installedFiles(state, sharing: new)
        let root = store.releaseDir(id) + "/"
        let expected = [root + "files/" + files[0].path, root + "groups/hd/" + files[1].path, root + "groups/hd/" + files[4].path,
                        nil, nil, root + "files/" + files[0].path]
        for (f, place) in zip(new, expected) { #expect(installed[f]?.place.full == place, "\(f.path)") }
        #expect(installed.foundInPlace == 2, "files 0 and 1 cost a number each")
        // By digest: file 3 (its path the new release's String), file 4, and file 0's content
        // for its copy; not file 5 (not on disk), nor file 2 (in place, but not on disk).
        #expect(installed.count == 3)
        #expect(installed[files[3].digest]?.place.full == root + "files/" + files[3].path)
        #expect(installed[files[5].digest] == nil && installed[files[2].digest] == nil)
        // Shared with the new release's Strings, not copied (one that sorts between them too).
        func storage(_ s: String) -> UnsafePointer<UInt8>? { s.utf8.withContiguousStorageIfAvailable { $0.baseAddress } ?? nil }
        for n in [0, 1, 5] {
            #expect(storage(installed[new[n]]!.place.path) == storage(new[n == 5 ? 0 : n].path), "\(n)")
            #expect(storage(installed[new[n]]!.place.path) != nil)
        }
        #expect(storage(installed[files[3].digest]!.place.path) == storage(new[4].path))
        #expect(storage(installed[new[2]]!.place.path) != storage(new[2].path))
        // A record that does not decode gives none of its files.
        try FS.writeAtomically(store.releaseRecordPath(id), Array(text.dropLast(30)))
        let bad = store.installedFiles(state, sharing: new)
        #expect(bad.count == 0 && bad.foundInPlace == 0 && new.allSatisfy { bad[$0] == nil })
    }
}
