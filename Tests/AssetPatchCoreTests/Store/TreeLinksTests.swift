import Glibc
import Testing
@testable import AssetPatchCore

@Suite struct TreeLinksTests {
    private func inode(_ path: String) -> (ino: UInt, links: UInt)? {
        var st = stat()
        return lstat(path, &st) == 0 ? (UInt(st.st_ino), UInt(st.st_nlink)) : nil
    }

    /// A release's worth of installed files, read-only as the store seals them: 40 directories of
    /// 10 (enough for the links to run on several threads).
    private func installed(_ dir: TempDir) throws -> [ManifestFile] {
        var files: [ManifestFile] = []
        for i in 0..<400 {
            let bytes = Array("file \(i)\n".utf8)
            let path = "d\(i % 40)/f\(i).txt"
            try dir.write("old/" + path, bytes)
            #expect(chmod(dir.path + "/old/" + path, 0o444) == 0)
            files.append(ManifestFile(path: path, size: UInt64(bytes.count), sha256: Hex.encode(try Digest.sha256(bytes))))
        }
        return files
    }

    @Test func installedFilesAreLinkedByDirectoryAndOnlyWhenSealed() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let files = try installed(dir)
        #expect(files.count >= TreeLinks.parallelFrom)
        // What another writer to the data directory may have done to four of them: made one
        // writable, another a different size, a third a symlink (to a sealed file), the fourth gone.
        let old = dir.path + "/old/"
        #expect(chmod(old + files[1].path, 0o644) == 0)
        try FS.unlink(old + files[2].path)
        try dir.write("old/" + files[2].path, Array("longer than it was\n".utf8))
        #expect(chmod(old + files[2].path, 0o444) == 0)
        try FS.unlink(old + files[3].path)
        #expect(symlink(old + files[0].path, old + files[3].path) == 0)
        try FS.unlink(old + files[4].path)
        // In index order consecutive files are in different directories: every directory is
        // linked in ten runs. One source is named by its full path alone (a fetched file).
        let links = files.enumerated().map { i, f in
            TreeLinks.Link(source: i == 10 ? TreeLinks.Place(root: "", path: old + f.path) : TreeLinks.Place(root: old, path: f.path),
                           target: TreeLinks.Place(root: dir.path + "/new/", path: f.path), size: f.size)
        }
        for d in Set(files.compactMap { $0.path.beforeLastSlash }) { try FS.makeDirectories(dir.path + "/new/" + d) }
        var reported: [(Int, UInt64)] = []
        // Every seventh is not a link (a file the caller fetches): passed over, in the runs too.
        let notLinks = files.indices.filter { $0 % 7 == 6 }
        let linked = try TreeLinks.make(links.count, cancel: CancelToken(), link: { notLinks.contains($0) ? nil : links[$0] }) { reported.append(($0, $1)) }
        let missed = files.indices.filter { !linked[$0] }
        #expect(linked.count == files.count && missed == ([1, 2, 3, 4] + notLinks).sorted())
        for (i, f) in files.enumerated() {
            let made = inode(dir.path + "/new/" + f.path)
            if missed.contains(i) {
                #expect(made == nil, "\(f.path) was linked")
            } else {
                #expect(made != nil && made?.ino == inode(old + f.path)?.ino && made?.links == 2, "\(f.path) is not a link to the installed file")
            }
        }
        // Progress, reported on this thread only, never goes back and ends at the links made, bytes
        // included (whichever threads made them).
        #expect(zip(reported, reported.dropFirst()).allSatisfy { $0.0 <= $1.0 && $0.1 <= $1.1 })
        let made = files.indices.filter { !missed.contains($0) }
        #expect(reported.last?.0 == made.count && reported.last?.1 == made.reduce(UInt64(0)) { $0 + files[$1].size })
    }

    @Test func placesAreCutAndComparedAsBytes() {
        // "/" then a combining mark is one Character: the name must still start after the "/".
        let accent = TreeLinks.Place(root: "/r/", path: "d/\u{301}x.png")
        #expect(String(decoding: accent.name, as: UTF8.self) == "\u{301}x.png" && String(decoding: accent.directory, as: UTF8.self) == "d")
        // Canonically equal, but other names on disk: other directories.
        let composed = TreeLinks.Place(root: "/r/", path: "dir\u{e9}/a"), decomposed = TreeLinks.Place(root: "/r/", path: "dire\u{301}/a")
        #expect(!composed.sharesDirectory(with: decomposed) && composed != decomposed)
        #expect(composed.directoryPath.utf8.count != decomposed.directoryPath.utf8.count)
        // A file at the root: its directory is the root without the "/" that would follow a link.
        #expect(TreeLinks.Place(root: "/r/files/", path: "a").directoryPath == "/r/files")
        #expect(TreeLinks.Place(root: "", path: "/abs/a").directoryPath == "/abs")
    }

    @Test func placingCopiesAndChecksWhatCouldNotBeLinked() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let files = try installed(dir)
        let old = dir.path + "/old/"
        // Writable but unchanged: copied, and the copy matches. Writable and changed (same size):
        // copied, checked, and refused, never linked into the new release.
        #expect(chmod(old + files[5].path, 0o644) == 0)
        let installer = Installer(store: try Store(root: dir.path + "/data"), maxReleaseBytes: 1 << 30, cancel: CancelToken(),
                                  progress: ProgressReporter(nil, cancel: CancelToken()))
        let plan = FilePlan(files: PlannedFiles(files.map { ($0, .installed(InstalledFile(root: old, path: $0.path, size: $0.size))) }), ranges: [])
        let durable = try installer.place(plan, fetched: { _ in nil }, rebuiltDir: dir.path + "/rebuilt") { TreeLinks.Place(root: dir.path + "/new/", path: $0.path) }
        #expect(durable.count == files.count && durable.filter { $0 }.count == files.count - 1 && !durable[5])
        #expect(try FS.readFile(dir.path + "/new/" + files[5].path) == FS.readFile(old + files[5].path))
        #expect(inode(dir.path + "/new/" + files[5].path)?.ino != inode(old + files[5].path)?.ino, "a writable file was linked")
        #expect(inode(dir.path + "/new/" + files[6].path)?.ino == inode(old + files[6].path)?.ino)

        try FS.removeTree(dir.path + "/new")
        var changed = try FS.readFile(old + files[5].path)
        changed[0] ^= 0x01
        try dir.write("old/" + files[5].path, changed)
        #expect(throws: DifferentialFallback.self) { _ = try installer.place(plan, fetched: { _ in nil }, rebuiltDir: dir.path + "/rebuilt") { TreeLinks.Place(root: dir.path + "/new/", path: $0.path) } }
    }
}
