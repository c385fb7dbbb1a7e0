import Glibc
import Testing
@testable import AssetPatchCore

/// The spare's record read once: `Store.installedFiles` reads the release the spare copies
/// against the new files as taking the spare would, and taking it uses that reading only
/// where it is the same record file (device and inode) read against the same list.
@Suite struct SpareReadTests {
    func sha(_ i: Int) -> String { String(repeating: Hex.encode([UInt8(i)]), count: 32) }

    @Test func takingTheSpareUsesTheRecordReadForThePlanOnlyWhereItIsTheSameFileAndList() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let store = try Store(root: dir.path + "/data")
        let files = (0..<5).map { ManifestFile(path: "d/f\($0).bin", size: UInt64($0 + 1), sha256: sha($0)) }
        let record = ReleaseRecord(version: 2, files: files, plugins: [], signatureVerified: true, archiveDigest: sha(9), label: nil)
        let id = "2-0123456789abcdef"
        try FS.makeDirectories(store.releaseDir(id) + "/files/d")
        var text: [UInt8] = []
        record.serialize { text += $0 }
        try FS.writeAtomically(store.releaseRecordPath(id), text)
        for f in files { try dir.write("data/releases/\(id)/files/" + f.path, Array(repeating: 1, count: Int(f.size))) }
        var state = StoreState()
        state.active = ReleaseRef(id: id, version: 2, verified: true)
        // The new release: f1 changed, f3 gone, f9 new; the others the same.
        var new = files
        new[1] = ManifestFile(path: "d/f1.bin", size: 7, sha256: sha(7))
        new.remove(at: 3)
        new.append(ManifestFile(path: "d/f9.bin", size: 3, sha256: sha(8)))

        // No spare: nothing read for it.
        var read = Store.RecordsRead()
        _ = store.installedFiles(state, sharing: new, read: &read)
        #expect(read.spare == nil && read.records.keys.sorted() == [id] && read.records[id]?.archiveDigest == sha(9))
        // A spare of the active release: its record is a hard link to the active one's.
        let spare = store.spareRoot + "/" + id
        try FS.makeDirectories(spare + "/files/d")
        #expect(link(store.releaseRecordPath(id), spare + "/release.json") == 0)
        _ = store.installedFiles(state, sharing: new, read: &read)
        let base = try #require(read.spare)
        var matches: [Int] = []
        base.matcher.forEachMatch { n, group in matches.append(n); #expect(group == 0) }
        #expect(base.id == id && matches == [0, 2, 3] && base.matcher.stale.map(\.path) == ["d/f1.bin", "d/f3.bin"])
        #expect(base.serves(spare, files: new))
        // A copy of the list, equal: served; one that differs in a digest, a size or a group: not.
        #expect(base.serves(spare, files: new.map { $0 }))
        for change in 0..<3 {
            var other = new
            switch change {
            case 0: other[2] = ManifestFile(path: other[2].path, size: other[2].size, sha256: sha(6))
            case 1: other[2].size += 1
            default: other[2].group = 1
            }
            #expect(!base.serves(spare, files: other), "change \(change)")
        }
        #expect(!base.serves(spare, files: Array(new.dropLast())))
        // The spare's record replaced by a copy of the same bytes (another inode): read again.
        try FS.unlink(spare + "/release.json")
        try FS.writeAtomically(spare + "/release.json", text)
        #expect(!base.serves(spare, files: new))
        // And by a symbolic link to the active record: not a record file of its own.
        try FS.unlink(spare + "/release.json")
        #expect(symlink(store.releaseRecordPath(id), spare + "/release.json") == 0)
        #expect(!base.serves(spare, files: new))
        // Reconciled from the reading or from the file, the tree is the same.
        try FS.unlink(spare + "/release.json")
        #expect(link(store.releaseRecordPath(id), spare + "/release.json") == 0)
        let info = ReleaseRecord(version: 3, files: new, plugins: [], signatureVerified: true, archiveDigest: sha(10), label: nil)
        let copy = dir.path + "/copy"
        try FS.makeDirectories(copy + "/files/d")
        #expect(link(store.releaseRecordPath(id), copy + "/release.json") == 0)
        for f in files { #expect(link(store.releaseDir(id) + "/files/" + f.path, copy + "/files/" + f.path) == 0) }
        for f in files { #expect(link(store.releaseDir(id) + "/files/" + f.path, spare + "/files/" + f.path) == 0) }
        let fromRead = try SpareTree.reconcile(spare, toward: info, files: new, read: base, cancel: CancelToken())
        let fromFile = try SpareTree.reconcile(copy, toward: info, files: new, cancel: CancelToken())
        #expect(fromRead.present == [true, false, true, true, false] && fromRead.present == fromFile.present)
        #expect(try FS.list(spare + "/files/d").sorted() == ["f0.bin", "f2.bin", "f4.bin"])
        #expect(try FS.list(copy + "/files/d").sorted() == ["f0.bin", "f2.bin", "f4.bin"])
    }
}
