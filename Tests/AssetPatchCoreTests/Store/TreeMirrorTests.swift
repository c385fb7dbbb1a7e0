import Glibc
import Testing
@testable import AssetPatchCore

@Suite struct TreeMirrorTests {
    /// Every entry under `root` (relative path: inode, or 0 for a directory), symbolic links
    /// included and not followed.
    private func tree(_ root: String) -> [String: UInt] {
        var out: [String: UInt] = [:]
        var stack = [""]
        while let rel = stack.popLast() {
            for name in (try? FS.list(rel.isEmpty ? root : root + "/" + rel)) ?? [] {
                let r = rel.isEmpty ? name : rel + "/" + name
                var st = stat()
                guard lstat(root + "/" + r, &st) == 0 else { continue }
                if (st.st_mode & S_IFMT) == S_IFDIR {
                    out[r] = 0
                    stack.append(r)
                } else {
                    out[r] = UInt(st.st_ino)
                }
            }
        }
        return out
    }

    @Test func theTargetBecomesTheSourcesTreeOfTheSameInodesKeepingOnlyItsOwnFiles() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let src = dir.path + "/src", dst = dir.path + "/dst"
        // The source: files in nested directories, and one directory of 3,000 long names (more
        // than one read of its listing).
        for p in ["a/same.txt", "a/copy.txt", "a/b/deep.txt", "moved", "dir-then-file", "new/x/y.txt", "top.txt"] {
            try dir.write("src/" + p, Array("source \(p)\n".utf8))
        }
        for i in 0..<3000 { try dir.write("src/many/" + String(repeating: "n", count: 40) + "\(i)", [UInt8(i & 0xFF)]) }
        // The target: a linked file (kept), a copy of the same bytes (not the source's file), a
        // directory where the source has a file and a file where it has a directory, files and a
        // directory tree the source lacks, a symbolic link (removed, not followed), a name that
        // is not UTF-8, and half of the many names.
        try FS.makeDirectories(dst + "/a/b")
        #expect(link(src + "/a/same.txt", dst + "/a/same.txt") == 0)
        try dir.write("dst/a/copy.txt", Array("source a/copy.txt\n".utf8))
        try dir.write("dst/dir-then-file/inner/f", Array("x".utf8))
        try dir.write("dst/moved", Array("a file, not a directory".utf8))
        try FS.unlink(dst + "/moved")
        try dir.write("dst/moved/sub", Array("was a directory".utf8))
        try dir.write("dst/gone/deeper/still/f", Array("x".utf8))
        try dir.write("dst/a/stale.txt", Array("x".utf8))
        try dir.write("outside", Array("must stay".utf8))
        #expect(symlink(dir.path + "/outside", dst + "/a/link") == 0)
        let raw: [UInt8] = Array((dst + "/a/").utf8) + [0x66, 0xFF, 0xFE, 0]
        let fd = raw.withUnsafeBufferPointer { Glibc.open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_CREAT | O_WRONLY, 0o644) }
        #expect(fd >= 0)
        close(fd)
        try FS.makeDirectories(dst + "/many")
        for i in stride(from: 0, to: 3000, by: 2) {
            let name = "/many/" + String(repeating: "n", count: 40) + "\(i)"
            #expect(link(src + name, dst + name) == 0)
        }
        let keptInode = tree(dst)["a/same.txt"]

        let changes = try TreeMirror.mirror(source: src, target: dst, cancel: CancelToken())
        #expect(tree(dst) == tree(src))
        #expect(tree(dst)["a/same.txt"] == keptInode)
        #expect(try dir.read("outside") == Array("must stay".utf8))
        // Linked: copy.txt, b/deep.txt, dir-then-file, moved, new/x/y.txt, top.txt and 1,500 of many.
        #expect(changes.linked == 6 + 1500)
        #expect(changes.directoriesMade == 2)
        // Mirrored again: nothing to do.
        let again = try TreeMirror.mirror(source: src, target: dst, cancel: CancelToken())
        #expect(again.linked == 0 && again.removed == 0 && again.directoriesMade == 0 && again.directoriesSynced == 0)
        #expect(tree(dst) == tree(src))
    }

    @Test func aLevelOfManyDirectoriesIsMirroredOnSeveralThreadsWithEveryChangeCounted() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let src = dir.path + "/src", dst = dir.path + "/dst"
        // One directory at the top, then a level of 12 (>= parallelFrom): the walk goes down the
        // first alone and mirrors the 12 subtrees on several threads.
        #expect(12 >= TreeMirror.parallelFrom)
        for d in 0..<12 {
            for p in ["f0", "f1", "f2", "f3", "f4", "s/g0", "s/g1"] { try dir.write("src/top/d\(d)/\(p)", Array("\(d)/\(p)".utf8)) }
        }
        // The target: d0...d5 with their f* linked, a stale file each and no s/; d6...d10
        // missing; d11 a file; a tree the source lacks.
        for d in 0..<6 {
            try FS.makeDirectories(dst + "/top/d\(d)")
            for f in 0..<5 { #expect(link(src + "/top/d\(d)/f\(f)", dst + "/top/d\(d)/f\(f)") == 0) }
            try dir.write("dst/top/d\(d)/x", Array("stale".utf8))
        }
        try dir.write("dst/top/d11", Array("a file".utf8))
        try dir.write("dst/top/gone/a/b/f", Array("x".utf8))

        // Each thread's first file waits (at most a minute) until another thread has asked too:
        // two walks provably run at once.
        let threads = Locked<[pthread_t]>([])
        let changes = try TreeMirror.mirror(source: src, target: dst, cancel: CancelToken()) { _, _, _ in
            let me = pthread_self()
            let first = threads.withLock { seen in
                guard !seen.contains(where: { pthread_equal($0, me) != 0 }) else { return false }
                seen.append(me)
                return true
            }
            var waited = 0
            while first && threads.withLock({ $0.count }) < 2 && waited < 60_000 {
                usleep(1000)
                waited += 1
            }
            return true
        }
        #expect(threads.withLock { $0.count } >= 2)
        #expect(tree(dst) == tree(src))
        #expect(changes.sourceFiles == 12 * 7)
        // s/g0 and s/g1 in d0...d5, all 7 files in d6...d11.
        #expect(changes.linked == 6 * 2 + 6 * 7)
        // x in d0...d5, the file d11, and gone/a/b/f, b, a and gone.
        #expect(changes.removed == 6 + 1 + 4)
        // s/ in d0...d5, d and s/ in d6...d11.
        #expect(changes.directoriesMade == 6 + 6 * 2)
        // top; each d and its s/; gone, a and b before their removal.
        #expect(changes.directoriesSynced == 1 + 12 * 2 + 3)

        // A file refused in one subtree stops the mirror, whichever thread met it.
        try FS.removeTree(dst + "/top/d7")
        try FS.removeTree(dst + "/top/d9")
        let asked = Locked<[String]>([])
        #expect(throws: AssetPatchError.self) {
            try TreeMirror.mirror(source: src, target: dst, cancel: CancelToken()) { path, _, _ in
                asked.withLock { $0.append(path) }
                return path != "top/d9/f3"
            }
        }
        #expect(asked.withLock { $0 }.contains("top/d9/f3"))
        #expect(!FS.exists(dst + "/top/d9/f3"))
    }

    @Test func aFileRefusedAsASourceADeepTreeOrAnotherDeviceStopsTheMirror() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        for p in ["a/one", "a/two", "b/three"] { try dir.write("src/" + p, Array(p.utf8)) }
        try FS.makeDirectories(dir.path + "/dst")
        // Asked about each file it links, by its path under the source; one refused stops it.
        var asked: [String] = []
        #expect(throws: AssetPatchError.self) {
            try TreeMirror.mirror(source: dir.path + "/src", target: dir.path + "/dst", cancel: CancelToken()) { path, _, _ in
                asked.append(path)
                return path != "a/two"
            }
        }
        #expect(asked == ["a/one", "a/two"])
        let all = try TreeMirror.mirror(source: dir.path + "/src", target: dir.path + "/dst", cancel: CancelToken())
        #expect(all.sourceFiles == 3 && all.linked == 2)
        // A tree deeper than the bound, in the target (to be removed) or the source, is refused.
        let deep = "/deep" + String(repeating: "/d", count: TreeMirror.maxDepth + 1)
        try FS.makeDirectories(dir.path + "/dst" + deep)
        #expect(throws: AssetPatchError.self) { try TreeMirror.mirror(source: dir.path + "/src", target: dir.path + "/dst", cancel: CancelToken()) }
        try FS.makeDirectories(dir.path + "/src2" + deep)
        try FS.makeDirectories(dir.path + "/dst2")
        #expect(throws: AssetPatchError.self) { try TreeMirror.mirror(source: dir.path + "/src2", target: dir.path + "/dst2", cancel: CancelToken()) }
        // A directory on another device (a mount point inside the target) is refused, and
        // nothing on it is removed. Needs root for the mount.
        try FS.removeTree(dir.path + "/dst/deep")
        try dir.write("dst/b/mounted/keep", Array("x".utf8))
        try FS.unlink(dir.path + "/dst/b/mounted/keep")
        if getuid() == 0, mount("tmpfs", dir.path + "/dst/b/mounted", "tmpfs", 0, nil) == 0 {
            defer { umount(dir.path + "/dst/b/mounted") }
            try dir.write("dst/b/mounted/keep", Array("on another device".utf8))
            #expect(throws: AssetPatchError.self) { try TreeMirror.mirror(source: dir.path + "/src", target: dir.path + "/dst", cancel: CancelToken()) }
            #expect(try dir.read("dst/b/mounted/keep") == Array("on another device".utf8))
        }
    }

    @Test func aSourceHoldingAnythingButFilesAndDirectoriesIsRefused() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try dir.write("src/f", Array("x".utf8))
        #expect(symlink(dir.path + "/src/f", dir.path + "/src/l") == 0)
        try FS.makeDirectories(dir.path + "/dst")
        #expect(throws: AssetPatchError.self) { try TreeMirror.mirror(source: dir.path + "/src", target: dir.path + "/dst", cancel: CancelToken()) }
        #expect(throws: AssetPatchError.self) { try TreeMirror.mirror(source: dir.path + "/nowhere", target: dir.path + "/dst", cancel: CancelToken()) }
    }
}
