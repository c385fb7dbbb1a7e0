internal import CSystem
import Glibc

/// Makes one directory tree the same as another on the same file system by hard links: what
/// differs in the target is removed, what it lacks is linked (or made, for a directory) from
/// the source, and a file it keeps is one that is already the source's own file (the same
/// inode). What it costs follows what differs, and the two trees' directory listings: no
/// record is read and no file is looked at on its own.
///
/// Used for the spare tree (`Store.makeSpare`): a leaving release's `files/` made the new
/// release's. Keeping a file only when it is the new release's inode is stronger than checking
/// it against a record: a file damaged, replaced or removed in the leaving tree is never the
/// new release's file, so it is linked afresh.
///
/// Inode numbers are compared as listed only on file systems whose listings give a file's own
/// inode number (ext4, XFS, btrfs, tmpfs, F2FS), and only within one device: every directory
/// of both trees must be on the device of the two roots (a mount point or btrfs subvolume
/// inside either is refused). Elsewhere (FUSE, overlayfs, network file systems) each same-named
/// pair is compared by `fstatat` (device and inode).
///
/// Every directory whose entries changed is fsynced once its own subtree is done (deepest
/// first), and a directory removed is emptied and synced before its removal, so that the tree is
/// durable as a whole when `mirror` returns. The descriptors are opened relative to their
/// parents: names stay bytes, and no path is walked twice.
///
/// The walk goes down one level at a time until a level has `parallelFrom` directories or
/// more; their subtrees are then mirrored on `threads` threads (each subtree by one). With cold
/// caches most of a large mirror is waiting for directory blocks, which one walk reads one at
/// a time; separate subtrees share no directory, so their reads and links overlap.
enum TreeMirror {
    /// What `mirror` did, for logs and tests.
    struct Changes {
        var linked = 0, removed = 0, directoriesMade = 0, directoriesSynced = 0
        /// The regular files the source holds.
        var sourceFiles = 0

        mutating func add(_ other: Changes) {
            linked += other.linked
            removed += other.removed
            directoriesMade += other.directoriesMade
            directoriesSynced += other.directoriesSynced
            sourceFiles += other.sourceFiles
        }
    }

    /// A level with this many directories in the source has their subtrees mirrored on
    /// `threads` threads; above it the walk goes on alone.
    static let parallelFrom = 8
    static let threads = 4

    /// Directories deeper than this (in either tree) are refused: two descriptors are open per
    /// level.
    static let maxDepth = 128

    /// File systems (`statfs.f_type`) whose directory listings give each file's own inode
    /// number: ext2/3/4, XFS, btrfs, tmpfs, F2FS.
    static let listedInodesExact: Set<Int> = [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0xF2F5_2010]

    /// Makes directory `target` hold exactly what `source` holds. `linking(path, dir, name)`
    /// is asked about each file of the source before it is linked (its path relative to
    /// `source`, and its name in the open directory `dir`), on several threads at once in a
    /// large tree; false refuses the mirror. Throws
    /// when a directory can't be read or changed, `source` holds anything but directories and
    /// regular files, a directory is on another device or deeper than `maxDepth`, or a file is
    /// refused; the target is then partly changed, and is not to be used as a copy.
    static func mirror(source: String, target: String, cancel: CancelToken,
                       linking: (String, Int32, UnsafePointer<CChar>) -> Bool = { _, _, _ in true }) throws -> Changes {
        let s = Glibc.open(source, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if s < 0 { throw ioError("open", source) }
        defer { close(s) }
        let t = Glibc.open(target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if t < 0 { throw ioError("open", target) }
        defer { close(t) }
        var ss = stat(), ts = stat()
        guard fstat(s, &ss) == 0, fstat(t, &ts) == 0 else { throw ioError("stat", target) }
        guard ss.st_dev == ts.st_dev else { throw AssetPatchError(.state, "\(source) and \(target) are on different devices") }
        return try withoutActuallyEscaping(linking) { linking in
            var walk = Walk(device: ss.st_dev, exact: listedInodesExact.contains(csystem_fs_type(t)), cancel: cancel, linking: linking)
            try walk.mirror(s, t, at: target, relative: "", depth: 0, spreading: true)
            return walk.changes
        }
    }

    private struct Walk {
        let device: dev_t
        /// Listed inode numbers are the files' own.
        let exact: Bool
        let cancel: CancelToken
        let linking: (String, Int32, UnsafePointer<CChar>) -> Bool
        var changes = Changes()

        /// Opens directory `name` in `dir`, refusing one on another device.
        func open(_ dir: Int32, _ name: UnsafePointer<CChar>, _ path: String) throws -> Int32 {
            let fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if fd < 0 { throw ioError("open", path) }
            var st = stat()
            guard fstat(fd, &st) == 0, st.st_dev == device else {
                close(fd)
                throw AssetPatchError(.state, "\(path): on another device than the tree")
            }
            return fd
        }

        /// Whether entry `i` of `want` (in `s`) and entry `j` of `have` (in `t`), both regular
        /// files, are the same file.
        func same(_ want: Listing, _ i: Int, in s: Int32, _ have: Listing, _ j: Int, in t: Int32) -> Bool {
            let a = want.entries[i].inode, b = have.entries[j].inode
            if exact { return a == b && a != 0 }
            var x = stat(), y = stat()
            return want.withName(i) { fstatat(s, $0, &x, AT_SYMLINK_NOFOLLOW) } == 0 && have.withName(j) { fstatat(t, $0, &y, AT_SYMLINK_NOFOLLOW) } == 0
                && x.st_dev == y.st_dev && x.st_ino == y.st_ino
        }

        /// Mirrors directory `s` into `t`. `spreading`: its subdirectories are done after its own
        /// entries, on several threads when there are `parallelFrom` or more, else each
        /// spreading in turn; otherwise each is done as it is met.
        mutating func mirror(_ s: Int32, _ t: Int32, at path: String, relative: String, depth: Int, spreading: Bool = false) throws {
            try cancel.check()
            guard depth <= TreeMirror.maxDepth else { throw AssetPatchError(.state, "\(path): deeper than \(TreeMirror.maxDepth) directories") }
            let want = try Listing(s, path: path), have = try Listing(t, path: path)
            var changed = false
            /// Subdirectories left for after this directory's entries (`spreading`): entry, path.
            var later: [(entry: Int, relative: String)] = []
            var i = 0, j = 0
            while i < want.count || j < have.count {
                let order = i == want.count ? 1 : j == have.count ? -1 : want.compare(i, have, j)
                if order > 0 {
                    // Only in the target: it goes.
                    try remove(have, j, in: t, at: path, depth: depth)
                    changed = true
                    j += 1
                    continue
                }
                let wantType = try want.type(i, in: s, at: path)
                guard wantType == DT_DIR || wantType == DT_REG else {
                    throw AssetPatchError(.state, "\(path)/\(want.name(i)): neither a directory nor a regular file in the source")
                }
                var present = false
                if order == 0 {
                    let haveType = try have.type(j, in: t, at: path)
                    if haveType == wantType && (wantType == DT_DIR || same(want, i, in: s, have, j, in: t)) {
                        present = true
                    } else {
                        try remove(have, j, in: t, at: path, depth: depth)
                        changed = true
                    }
                    j += 1
                }
                let rel = relative.isEmpty ? want.name(i) : relative + "/" + want.name(i)
                try want.withName(i) { name in
                    if wantType == DT_REG {
                        changes.sourceFiles += 1
                        guard !present else { return }
                        guard linking(rel, s, name) else { throw AssetPatchError(.state, "\(path)/\(want.name(i)): refused as a source file") }
                        if linkat(s, name, t, name, 0) != 0 { throw ioError("link", path + "/" + want.name(i)) }
                        changes.linked += 1
                        changed = true
                        return
                    }
                    if !present {
                        if mkdirat(t, name, 0o755) != 0 { throw ioError("mkdir", path + "/" + want.name(i)) }
                        changes.directoriesMade += 1
                        changed = true
                    }
                    if spreading {
                        later.append((i, rel))
                    } else {
                        try descend(want, i, s, t, at: path, relative: rel, depth: depth, spreading: false)
                    }
                }
                i += 1
            }
            if later.count >= TreeMirror.parallelFrom {
                // A walk of its own for each subtree; what they did is added up once all are done.
                // One that fails stops the others (the target is not to be used then).
                let total = Locked(Changes())
                let stop = CancelToken(within: cancel)
                let (device, exact, linking) = (device, exact, linking)
                try parallelForEach(later.count, threads: TreeMirror.threads) { k in
                    var walk = Walk(device: device, exact: exact, cancel: stop, linking: linking)
                    defer { total.withLock { $0.add(walk.changes) } }
                    do {
                        try walk.descend(want, later[k].entry, s, t, at: path, relative: later[k].relative, depth: depth, spreading: false)
                    } catch {
                        stop.cancel()
                        throw error
                    }
                }
                changes.add(total.withLock { $0 })
            } else {
                for (i, rel) in later { try descend(want, i, s, t, at: path, relative: rel, depth: depth, spreading: true) }
            }
            if changed {
                try TreeMirror.sync(t, path)
                changes.directoriesSynced += 1
            }
        }

        /// Mirrors subdirectory `i` of `want` (in `s`) into its namesake in `t`.
        mutating func descend(_ want: Listing, _ i: Int, _ s: Int32, _ t: Int32, at path: String, relative: String, depth: Int,
                              spreading: Bool) throws {
            let sub = path + "/" + want.name(i)
            try want.withName(i) { name in
                let cs = try open(s, name, sub)
                defer { close(cs) }
                let ct = try open(t, name, sub)
                defer { close(ct) }
                try mirror(cs, ct, at: sub, relative: relative, depth: depth + 1, spreading: spreading)
            }
        }

        /// Removes entry `k` of `listing` from directory `dir`; a directory is emptied and synced
        /// first (its unlinks durable before its removal is: a file system that orders each
        /// directory on its own could otherwise bring it back, with its old files, past a power cut).
        mutating func remove(_ listing: Listing, _ k: Int, in dir: Int32, at path: String, depth: Int) throws {
            let type = try listing.type(k, in: dir, at: path)
            let sub = path + "/" + listing.name(k)
            try listing.withName(k) { name in
                if type == DT_DIR {
                    guard depth < TreeMirror.maxDepth else { throw AssetPatchError(.state, "\(sub): deeper than \(TreeMirror.maxDepth) directories") }
                    let d = try open(dir, name, sub)
                    defer { close(d) }
                    let inside = try Listing(d, path: sub)
                    for e in 0..<inside.count { try remove(inside, e, in: d, at: sub, depth: depth + 1) }
                    try TreeMirror.sync(d, sub)
                    changes.directoriesSynced += 1
                    if unlinkat(dir, name, AT_REMOVEDIR) != 0 { throw ioError("rmdir", sub) }
                } else if unlinkat(dir, name, 0) != 0 {
                    throw ioError("unlink", sub)
                }
                changes.removed += 1
            }
        }
    }

    private static func sync(_ fd: Int32, _ path: String) throws {
        if let e = FaultInjection.check("fsync") { throw ioError("fsync", path, e) }
        if fsync(fd) != 0 { throw ioError("fsync", path) }
    }

    /// A directory's entries ("." and ".." aside), sorted by name as bytes, with their inode
    /// numbers and types as the directory gives them.
    struct Listing {
        struct Entry {
            var start: Int32, length: Int32
            var inode: UInt64
            var type: UInt8
        }
        /// The names, each followed by a NUL.
        private var names: [UInt8] = []
        private(set) var entries: [Entry] = []
        var count: Int { entries.count }

        init(_ fd: Int32, path: String) throws {
            // Read from the start: a descriptor is listed once.
            var buffer = [UInt8](repeating: 0, count: 32 << 10)
            while true {
                let n = buffer.withUnsafeMutableBytes { csystem_getdents64(fd, $0.baseAddress, UInt(32 << 10)) }
                if n < 0 { throw ioError("getdents64", path) }
                if n == 0 { break }
                buffer.withUnsafeBytes { b in
                    // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
                    var at = 0
                    while at + 19 < n {
                        let inode = b.loadUnaligned(fromByteOffset: at, as: UInt64.self)
                        let length = Int(b.loadUnaligned(fromByteOffset: at + 16, as: UInt16.self))
                        let type = b[at + 18]
                        guard length > 19, at + length <= n else { break }
                        var end = at + 19
                        while end < at + length, b[end] != 0 { end += 1 }
                        let name = UnsafeRawBufferPointer(rebasing: b[(at + 19)..<end])
                        let dots = name.count == 1 && name[0] == UInt8(ascii: ".") || name.count == 2 && name[0] == UInt8(ascii: ".") && name[1] == UInt8(ascii: ".")
                        if !dots {
                            entries.append(Entry(start: Int32(names.count), length: Int32(name.count), inode: inode, type: type))
                            names.append(contentsOf: name)
                            names.append(0)
                        }
                        at += length
                    }
                }
            }
            let all = names
            func order(_ a: Entry, _ b: Entry) -> Int {
                all.withUnsafeBytes { p in
                    let c = memcmp(p.baseAddress! + Int(a.start), p.baseAddress! + Int(b.start), Int(min(a.length, b.length)))
                    return c != 0 ? Int(c) : Int(a.length) - Int(b.length)
                }
            }
            entries.sort { order($0, $1) < 0 }
            // A name listed twice (the directory changed while it was read) counts once.
            entries = entries.indices.filter { $0 == 0 || order(entries[$0 - 1], entries[$0]) != 0 }.map { entries[$0] }
        }

        /// Entry `i` of this listing against entry `j` of `other`, by name as bytes.
        func compare(_ i: Int, _ other: Listing, _ j: Int) -> Int {
            let a = entries[i], b = other.entries[j]
            return names.withUnsafeBytes { p in
                other.names.withUnsafeBytes { q in
                    let c = memcmp(p.baseAddress! + Int(a.start), q.baseAddress! + Int(b.start), Int(min(a.length, b.length)))
                    return c != 0 ? Int(c) : Int(a.length) - Int(b.length)
                }
            }
        }

        /// Entry `i`'s name as a C string, during `body`.
        func withName<R>(_ i: Int, _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
            try names.withUnsafeBytes { try body(($0.baseAddress! + Int(entries[i].start)).assumingMemoryBound(to: CChar.self)) }
        }

        /// Entry `i`'s name, for messages.
        func name(_ i: Int) -> String {
            String(decoding: names[Int(entries[i].start)..<Int(entries[i].start + entries[i].length)], as: UTF8.self)
        }

        /// Entry `i`'s type (`DT_DIR`, `DT_REG`, ...): as listed, or looked up (without following
        /// a link) where the file system does not say.
        func type(_ i: Int, in dir: Int32, at path: String) throws -> Int {
            let t = Int(entries[i].type)
            guard t == DT_UNKNOWN else { return t }
            var st = stat()
            if withName(i, { fstatat(dir, $0, &st, AT_SYMLINK_NOFOLLOW) }) != 0 { throw ioError("stat", path + "/" + name(i)) }
            switch st.st_mode & S_IFMT {
            case S_IFDIR: return DT_DIR
            case S_IFREG: return DT_REG
            default: return -1
            }
        }
    }
}
