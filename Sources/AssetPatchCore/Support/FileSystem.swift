import Glibc
import Synchronization

internal import CSystem

/// A test seam (swift-system's mocking idea): operations named here fail with the given errno
/// instead of calling the system, on the thread that asked (tests run in parallel). Empty in
/// production; only tests fill it.
package enum FaultInjection {
    static let failures = Locked<[String: (thread: UInt, errno: Int32)]>([:])

    package static func fail(_ operation: String, errno code: Int32) {
        let me = UInt(pthread_self())
        failures.withLock { $0[operation] = (me, code) }
    }

    package static func clear() {
        let me = UInt(pthread_self())
        failures.withLock { $0 = $0.filter { $0.value.thread != me } }
        recording.withLock { $0[me] = nil }
    }

    /// What `FS.syncFiles` was asked to make durable on threads a test asked to record, a call
    /// at a time (the files, the directories).
    static let recording = Locked<[UInt: [(files: [String], directories: [String])]]>([:])

    /// Records this thread's `FS.syncFiles` calls from now on, until `clear`.
    package static func recordSyncs() {
        let me = UInt(pthread_self())
        recording.withLock { $0[me] = [] }
    }

    /// The calls recorded on this thread, in order.
    package static func recordedSyncs() -> [(files: [String], directories: [String])] {
        let me = UInt(pthread_self())
        return recording.withLock { $0[me] ?? [] }
    }

    static func noteSync(_ files: [String], _ directories: [String]) {
        recording.withLock {
            guard !$0.isEmpty else { return }
            $0[UInt(pthread_self())]?.append((files, directories))
        }
    }

    /// The errno to fail `operation` with, if a test on this thread asked for it.
    @inline(__always)
    static func check(_ operation: String) -> Int32? {
        failures.withLock { f -> Int32? in
            guard !f.isEmpty, let entry = f[operation], entry.thread == UInt(pthread_self()) else { return nil }
            return entry.errno
        }
    }
}

/// `strerror` text for an errno value.
func errnoText(_ code: Int32) -> String {
    guard let s = strerror(code) else { return "errno \(code)" }
    return String(cString: s)
}

/// An `ASSETPATCH_ERR_IO` error naming the operation, the path and the errno text.
func ioError(_ operation: String, _ path: String, _ code: Int32 = errno) -> AssetPatchError {
    AssetPatchError(.io, "\(operation) \(path): \(errnoText(code))", errno: code)
}

/// An open file descriptor that closes itself. Not shared between threads.
package final class File {
    package let fd: Int32
    package let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws -> File {
        let fd = retryingEINTR { Glibc.open(path, flags | O_CLOEXEC, mode) }
        if fd < 0 { throw ioError("open", path) }
        return File(fd: fd, path: path)
    }

    package static func openRead(_ path: String) throws -> File {
        try open(path, O_RDONLY)
    }

    /// Reads up to `count` bytes at the current offset; 0 at end of file.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let n = retryingEINTR { Glibc.read(fd, buffer.baseAddress, buffer.count) }
        if n < 0 { throw ioError("read", path) }
        return n
    }

    /// Reads up to `buffer.count` bytes at `offset`, looping over short reads; fewer only at end of file.
    package func pread(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = retryingEINTR { Glibc.pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done)) }
            if n < 0 { throw ioError("read", path) }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads exactly `count` bytes at `offset` or throws (`truncated` names the failure).
    package func preadExactly(_ count: Int, at offset: UInt64, what: @autoclosure () -> String) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let n = try out.withUnsafeMutableBytes { (b: UnsafeMutableRawBufferPointer) in
            try pread(into: b, at: offset)
        }
        if n != count { throw AssetPatchError(.archive, "\(path): \(what()) is truncated") }
        return out
    }

    package func write(_ buffer: UnsafeRawBufferPointer) throws {
        var done = 0
        while done < buffer.count {
            let n = retryingEINTR { Glibc.write(fd, buffer.baseAddress! + done, buffer.count - done) }
            if n < 0 { throw ioError("write", path) }
            done += n
        }
    }

    package func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { (b: UnsafeRawBufferPointer) in try write(b) }
    }

    package func pwrite(_ buffer: UnsafeRawBufferPointer, at offset: UInt64) throws {
        var done = 0
        while done < buffer.count {
            let n = retryingEINTR { Glibc.pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done)) }
            if n < 0 { throw ioError("write", path) }
            done += n
        }
    }

    package func pwrite(_ bytes: [UInt8], at offset: UInt64) throws {
        try bytes.withUnsafeBytes { (b: UnsafeRawBufferPointer) in try pwrite(b, at: offset) }
    }

    /// fsync. A failure is reported, never retried: after a failed fsync Linux may have dropped
    /// the dirty pages, so the caller must redo the whole step.
    package func sync() throws {
        if let e = FaultInjection.check("fsync") { throw ioError("fsync", path, e) }
        if fsync(fd) != 0 { throw ioError("fsync", path) }
    }

    /// Starts writing the file's dirty pages to disk without waiting (sync_file_range), so that
    /// the fdatasync that later makes it durable finds them written. Best effort.
    package func startWriteback() {
        _ = csystem_start_writeback(fd)
    }

    /// Tells the kernel the file is read front to back (more read-ahead). Best effort.
    package func adviseSequential() {
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
    }

    package func size() throws -> UInt64 {
        var st = stat()
        if fstat(fd, &st) != 0 { throw ioError("stat", path) }
        return UInt64(st.st_size)
    }

    package func truncate(to length: UInt64) throws {
        if ftruncate(fd, off_t(length)) != 0 { throw ioError("truncate", path) }
    }

}

/// A system call made again for as long as a signal interrupts it (EINTR): the one place that
/// rule is written.
@inline(__always)
func retryingEINTR<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let r = call()
        if r >= 0 || errno != EINTR { return r }
    }
}

/// Filesystem operations with errors that name the path. The corresponding C functions are
/// the POSIX calls of the same names.
package enum FS {
    package static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    package static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    package static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    package static func fileSize(_ path: String) -> UInt64? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return UInt64(st.st_size)
    }

    /// `mkdir -p`.
    package static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws {
        // The directory itself first: its parents are tried only when missing, so making a
        // release's directories costs about one mkdir each, not one per path component.
        if mkdir(path, mode) == 0 { return }
        switch errno {
        case EEXIST:
            break
        case ENOENT:
            let parent = FS.parent(of: path)
            guard parent != path, !parent.isEmpty else { throw ioError("mkdir", path) }
            try makeDirectories(parent, mode: mode)
            if mkdir(path, mode) != 0 && errno != EEXIST { throw ioError("mkdir", path) }
        default:
            throw ioError("mkdir", path)
        }
        if !isDirectory(path) { throw AssetPatchError(.io, "mkdir \(path): not a directory") }
    }

    package static func rename(_ from: String, _ to: String) throws {
        if let e = FaultInjection.check("rename") { throw ioError("rename \(from) ->", to, e) }
        if Glibc.rename(from, to) != 0 { throw ioError("rename \(from) ->", to) }
    }

    package static func unlink(_ path: String) throws {
        if Glibc.unlink(path) != 0 && errno != ENOENT { throw ioError("unlink", path) }
    }

    /// `$TMPDIR`, else /tmp: where work that must not touch a repository goes.
    package static var temporaryDirectory: String { getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp" }

    /// fsync of a directory, making a rename or creation inside it durable.
    package static func syncDirectory(_ path: String) throws {
        try sync(directory: path, "fsync") { fsync($0) }
    }

    /// Opens `directory` and runs the sync call `operation` on it (a fault-injection point).
    private static func sync(directory path: String, _ operation: String, _ call: (Int32) -> Int32) throws {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 { throw ioError("open", path) }
        defer { close(fd) }
        if let e = FaultInjection.check(operation) { throw ioError(operation, path, e) }
        if call(fd) != 0 { throw ioError(operation, path) }
    }

    /// Names in a directory, without "." and "..", unsorted.
    package static func list(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw ioError("opendir", path) }
        defer { closedir(dir) }
        var names: [String] = []
        // The name is read where it lies: a dirent is only as long as its name needs (d_reclen),
        // so loading the whole struct (d_name is declared 256 bytes) can read past glibc's buffer.
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while let entry = readdir(dir) {
            let name = String(cString: (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self))
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Recursively lists the regular files under `root` as `/`-separated relative paths.
    /// Symbolic links are not followed.
    package static func walkFiles(_ root: String) throws -> [String] {
        var out: [String] = []
        var stack: [String] = [""]
        while let rel = stack.popLast() {
            let dir = rel.isEmpty ? root : root + "/" + rel
            for name in try list(dir) {
                let relPath = rel.isEmpty ? name : rel + "/" + name
                var st = stat()
                if lstat(root + "/" + relPath, &st) != 0 { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: stack.append(relPath)
                case S_IFREG: out.append(relPath)
                default: break
                }
            }
        }
        return out
    }

    /// `rm -rf` that never follows symbolic links out of the tree. Missing paths are fine.
    package static func removeTree(_ path: String) throws {
        var st = stat()
        if lstat(path, &st) != 0 {
            if errno == ENOENT { return }
            throw ioError("stat", path)
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            for name in try list(path) { try removeTree(path + "/" + name) }
            if rmdir(path) != 0 && errno != ENOENT { throw ioError("rmdir", path) }
        } else {
            try unlink(path)
        }
    }

    /// Reads a whole (small) file; more than `limit` bytes is an error of `limitStatus`.
    /// `followLinks` false: a symbolic link at `path` is an error (ELOOP), for files inside the
    /// data directory, which the library alone writes.
    package static func readFile(_ path: String, limit: Int = 64 << 20, limitStatus: Status = .io, followLinks: Bool = true) throws -> [UInt8] {
        let file = try File.open(path, O_RDONLY | (followLinks ? 0 : O_NOFOLLOW))
        var out: [UInt8] = []
        // Sized once: grown by doubling, a 12 MB release record took 24 MB while it was read.
        var st = stat()
        if fstat(file.fd, &st) == 0, st.st_size > 0 { out.reserveCapacity(min(Int(st.st_size), limit) + 1) }
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = try chunk.withUnsafeMutableBytes { (b: UnsafeMutableRawBufferPointer) in
                try file.read(into: b)
            }
            if n == 0 { break }
            if out.count + n > limit {
                throw AssetPatchError(limitStatus, "\(path): larger than the limit of \(limit) bytes")
            }
            out.append(contentsOf: chunk[0..<n])
        }
        return out
    }

    /// Replaces `path` atomically and durably: write a temporary file, fsync it, rename it over
    /// `path`, fsync the directory. Readers see the old or the new content, never a mix, also
    /// after a power cut.
    ///
    /// The temporary file is new (O_EXCL, O_NOFOLLOW) and named for this process and call
    /// (`tempName`): nothing already at a temporary name, such as a planted symbolic link, is
    /// ever written through, and two processes writing one file never share a temporary.
    /// `modified`: the modification time to give the file (seconds since 1970), else now.
    /// `durable` false: no fsync of the file or its directory, for content its reader checks
    /// against its name and fetches again when a power cut left it short or gone.
    package static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644, modified: Int64? = nil,
                                        durable: Bool = true) throws {
        var tmp = ""
        var file: File?
        for _ in 0..<100 {
            tmp = tempName(for: path)
            do {
                file = try File.open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: mode)
                break
            } catch let e as AssetPatchError where e.errno == EEXIST {
                continue  // left by a process of the same pid long gone: recovery removes it
            }
        }
        guard let file else { throw AssetPatchError(.io, "\(path): no free temporary name") }
        do {
            try file.write(bytes)
            if let modified {
                // Before the fsync, so the time is as durable as the bytes; a rename keeps it.
                var times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 1),  // UTIME_NOW
                              timespec(tv_sec: Int(modified), tv_nsec: 0)]
                if futimens(file.fd, &times) != 0 { throw ioError("futimens", tmp) }
            }
            if durable { try file.sync() }
        } catch {
            _ = Glibc.unlink(tmp)
            throw error
        }
        do { try rename(tmp, path) } catch {
            _ = Glibc.unlink(tmp)
            throw error
        }
        if durable { try syncDirectory(parent(of: path)) }
    }

    private static let tempCounter = Atomic<UInt64>(0)

    /// `<path>.tmp.<pid>.<n>`: the temporary name of one `writeAtomically` call.
    static func tempName(for path: String) -> String {
        let n = tempCounter.add(1, ordering: .relaxed).newValue
        return "\(path).tmp.\(getpid()).\(n)"
    }

    /// The pid in a temporary name `tempName` made, if `name` is one.
    static func tempOwner(_ name: String) -> pid_t? {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[parts.count - 3] == "tmp", UInt64(parts[parts.count - 1]) != nil else { return nil }
        return pid_t(parts[parts.count - 2])
    }

    package static func parent(of path: String) -> String {
        guard let parent = path.beforeLastSlash else { return "." }
        return parent.isEmpty ? "/" : parent
    }

    /// An absolute, normalised form of `path` (relative to the working directory).
    package static func absolute(_ path: String) -> String {
        var full = path
        if path.utf8.first != UInt8(ascii: "/") {  // by byte: "/" + a combining mark is one Character
            var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            if getcwd(&buf, buf.count) != nil {
                let cwd = buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                full = cwd + "/" + path
            }
        }
        var parts: [String] = []
        for part in full.slashComponents {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }
}
