import Glibc

/// The sha256 of the bundle's files, so that a differential update takes a file the app already
/// ships from the bundle instead of the network. Hashing a large bundle costs real time, so the
/// digests are cached in `<data_dir>/bundle-digests`, each under the file's fingerprint: size,
/// modification and change times (nanoseconds), inode and device. An app upgrade that replaces
/// or rewrites a bundle file changes its fingerprint (the change time can't be set back), and
/// that file alone is hashed again. Only files whose size some wanted file has are hashed at all.
///
/// A fingerprint is only as fine as the file system's timestamps: a file rewritten with the same
/// size within one timestamp tick of being hashed (ext4 ticks every few milliseconds, some file
/// systems every second or two) keeps its fingerprint with new content ("racy git"). So a digest
/// is cached only when the file had not changed for `racyWindowNs` before it was fingerprinted;
/// a file changed more recently is hashed again by the next update that wants it. (A digest
/// only proposes a source: the bundle file is hashed again as it is copied into a release.)
struct BundleDigests {
    /// How long before hashing a file must have last changed for its digest to be cached: two
    /// seconds, the coarsest timestamps in common use (FAT).
    static let racyWindowNs: Int64 = 2_000_000_000
    /// One bundle file's identity on disk.
    struct Fingerprint: Equatable {
        var size: UInt64
        var mtimeNs: Int64
        var ctimeNs: Int64
        var inode: UInt64
        var device: UInt64

        init?(_ path: String) {
            var st = stat()
            guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
            size = UInt64(st.st_size)
            mtimeNs = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            ctimeNs = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
            inode = UInt64(st.st_ino)
            device = UInt64(st.st_dev)
        }

        init(size: UInt64, mtimeNs: Int64, ctimeNs: Int64, inode: UInt64, device: UInt64) {
            self.size = size
            self.mtimeNs = mtimeNs
            self.ctimeNs = ctimeNs
            self.inode = inode
            self.device = device
        }
    }

    let bundleDir: String
    let cachePath: String
    /// Files hashed by the last `digests` call that the cache did not know (for tests and logs).
    private(set) var hashedCount = 0
    /// The wall clock, nanoseconds (tests move it).
    var clock: () -> Int64 = wallClockNanos

    init(bundleDir: String, cachePath: String) {
        self.bundleDir = bundleDir
        self.cachePath = cachePath
    }

    /// sha256 → absolute path of a bundle file with that content, among the files of the given
    /// sizes. Files that vanish or fail to read while hashing are left out. The cache is
    /// rewritten (atomically) when it learned something; failing to write it only costs time.
    mutating func digests(sizes: Set<UInt64>, cancel: CancelToken) throws -> [String: String] {
        guard !sizes.isEmpty else { return [:] }
        let cached = loadCache()
        var fresh: [String: (Fingerprint, String)] = [:]
        var result: [String: String] = [:]
        hashedCount = 0
        var changed = false
        // Files changed since this instant, less the window, may still change unseen.
        let settled = clock() - BundleDigests.racyWindowNs
        var racy = Set<String>()
        for rel in try FS.walkFiles(bundleDir) where ResourceName.isValid(rel) {
            let path = bundleDir + "/" + rel
            guard let fp = Fingerprint(path) else { continue }
            var sha: String
            if let (known, digest) = cached[rel], known == fp {
                sha = digest
            } else {
                guard sizes.contains(fp.size) else { continue }
                try cancel.check()
                guard let d = try? Digest.hexOfFile(path) else { continue }
                // A file rewritten while it was read gets no digest: its fingerprint moved.
                guard Fingerprint(path) == fp else { continue }
                sha = d
                hashedCount += 1
                changed = true
                if max(fp.ctimeNs, fp.mtimeNs) > settled { racy.insert(rel) }
            }
            fresh[rel] = (fp, sha)
            if sizes.contains(fp.size), result[sha] == nil { result[sha] = path }
        }
        for rel in racy { fresh[rel] = nil }
        if changed || cached.keys.contains(where: { fresh[$0] == nil }) { saveCache(fresh) }
        return result
    }

    /// Which of `files` (relative path, sha256) the bundle has now with that sha256, by the
    /// cache alone: a file whose fingerprint moved since it was hashed is not among them. No
    /// file is read: this runs at an open.
    func verified(_ files: [(path: String, sha256: String)]) -> Set<String> {
        let cached = loadCache()
        var out = Set<String>()
        for (rel, sha) in files {
            guard let (fp, digest) = cached[rel], digest == sha, Fingerprint(bundleDir + "/" + rel) == fp else { continue }
            out.insert(rel)
        }
        return out
    }

    // MARK: The cache file

    /// `{"format":1,"bundle":DIR,"files":[[path,sha256,size,mtime_ns,ctime_ns,inode,device],…]}`.
    /// Another bundle directory's cache, or an unreadable one, counts as empty.
    private func loadCache() -> [String: (Fingerprint, String)] {
        guard let bytes = try? FS.readFile(cachePath, limit: 256 << 20, followLinks: false), let json = try? JSONParser.parse(bytes),
              json["format"]?.int64 == 1, json["bundle"]?.string == bundleDir, let files = json["files"]?.array else { return [:] }
        var out: [String: (Fingerprint, String)] = [:]
        for item in files {
            guard let a = item.array, a.count == 7, let path = a[0].string, let sha = a[1].string, sha.utf8.count == 64,
                  let size = a[2].int64, let mtime = a[3].int64, let ctime = a[4].int64, let ino = a[5].int64, let dev = a[6].int64,
                  size >= 0 else { continue }
            out[path] = (Fingerprint(size: UInt64(size), mtimeNs: mtime, ctimeNs: ctime,
                                     inode: UInt64(bitPattern: ino), device: UInt64(bitPattern: dev)), sha)
        }
        return out
    }

    private func saveCache(_ files: [String: (Fingerprint, String)]) {
        let items: [JSON] = files.keys.sorted().map { rel in
            let (fp, sha) = files[rel]!
            return .array([.string(rel), .string(sha), .int(Int64(fp.size)), .int(fp.mtimeNs), .int(fp.ctimeNs),
                           .int(Int64(bitPattern: fp.inode)), .int(Int64(bitPattern: fp.device))])
        }
        let json = JSON.object([("format", .int(1)), ("bundle", .string(bundleDir)), ("files", .array(items))])
        try? FS.writeAtomically(cachePath, Array(json.serialized().utf8))
    }
}
