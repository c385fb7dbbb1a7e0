import Glibc
internal import CSystem

/// A manifest accepted for installation, with everything derived from it.
struct Candidate {
    var manifest: Manifest
    var archiveURL: String
    var version: Int64
    var releaseID: String
}

/// The running digest of a partial download and how many of its bytes it covers. Kept across
/// the retries of one update, so a retry re-reads the partial file only when the file no longer
/// matches what was hashed (a restart, or a write that failed half-way).
final class PartialHash {
    private let digest: Digest
    private(set) var count: UInt64 = 0

    init(_ algorithm: Digest.Algorithm) throws {
        digest = try Digest(algorithm)
    }

    func update(_ chunk: UnsafeRawBufferPointer) {
        digest.update(chunk)
        count += UInt64(chunk.count)
    }

    func reset() {
        digest.reset()
        count = 0
    }

    /// Makes the digest cover exactly the first `length` bytes of `file`.
    func cover(_ file: File, length: UInt64) throws {
        if count == length { return }
        reset()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while count < length {
            let want = Int(min(UInt64(buffer.count), length - count))
            let n = try file.pread(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: count)
            if n == 0 { throw AssetPatchError(.io, "\(file.path): shorter than expected while re-hashing") }
            update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
    }

    /// The digest's hex. The digest starts over afterwards (a finalised EVP context must be
    /// re-initialised before further use).
    func finish() -> String {
        let hex = digest.finalHex()
        reset()
        return hex
    }
}

/// Raised inside a download when the server's answer means "start again from byte 0".
private struct RestartDownload: Error {
    let reason: String
}

/// One update or check: manifest -> gates -> download -> install -> activate.
/// Runs on one thread; the client swaps in the result.
final class Updater {
    let store: Store
    let config: ClientConfig
    let cancel: CancelToken
    let progress: ProgressReporter
    let log: (Int, String) -> Void
    let http: HTTPClient

    static let maxRetries = 3

    init(store: Store, config: ClientConfig, cancel: CancelToken, progress: ProgressHandler?, log: @escaping (Int, String) -> Void) {
        self.store = store
        self.config = config
        self.cancel = cancel
        self.progress = ProgressReporter(progress, cancel: cancel)
        self.log = log
        self.http = HTTPClient(settings: config.http, cancel: cancel)
    }

    // MARK: Manifest

    func fetchManifest() throws -> (bytes: [UInt8], finalURL: String) {
        guard let url = config.manifestURL else { throw AssetPatchError(.state, "no manifest_url set") }
        switch URLs.scheme(url) {
        case .file:
            guard let path = URLs.filePath(url) else { throw AssetPatchError(.argument, "\(url): not a local file URL") }
            let bytes = try FS.readFile(path, limit: config.maxManifestBytes, limitStatus: .manifest)
            return (bytes, url)
        case .http, .https:
            let r = try withRetries("GET \(URLs.redacted(url))") {
                try http.fetch(url, limit: config.maxManifestBytes, limitStatus: .manifest)
            }
            return (r.body, r.finalURL)
        case nil:
            throw AssetPatchError(.argument, "\(URLs.redacted(url)): unsupported URL scheme")
        }
    }

    /// Fetches and judges the manifest. nil: nothing to do (`ASSETPATCH_NO_UPDATE`).
    /// Accepting it pins the package and moves the downgrade mark in `state`.
    func evaluate(_ state: inout StoreState) throws -> Candidate? {
        let (bytes, finalURL) = try fetchManifest()
        let source = URLs.redacted(finalURL)
        let manifest = try Manifest.decode(bytes, trustedKeys: config.publicKeys, source: source)
        try cancel.check()

        let archiveURL = URLs.resolve(manifest.archiveURL, against: finalURL)
        guard let archiveScheme = URLs.scheme(archiveURL) else {
            throw AssetPatchError(.manifest, "\(source): archive URL \"\(URLs.redacted(archiveURL))\" has an unsupported scheme")
        }
        // A remote manifest may not make the client read local files.
        if archiveScheme == .file && URLs.scheme(finalURL) != .file {
            throw AssetPatchError(.manifest, "\(source): a remote manifest may not name a file:// archive")
        }

        if manifest.kind == .legacy {
            if manifest.archiveDigest == state.activeLegacyDigest || manifest.archiveDigest == state.pendingLegacyDigest {
                return nil
            }
            let version = max(state.highestInstalled, state.highestVersion, state.active?.version ?? 0) + 1
            return Candidate(manifest: manifest, archiveURL: archiveURL, version: version,
                             releaseID: Store.releaseID(version: version, digest: manifest.archiveDigest))
        }

        let package = manifest.package ?? "default"
        if let pinned = state.package, pinned != package {
            throw AssetPatchError(.manifest, "\(source): package \"\(package)\" is not the pinned package \"\(pinned)\"")
        }
        let v = manifest.version
        let activeIsFormat1 = state.activeLegacyDigest == nil
        if (activeIsFormat1 && v == state.active?.version) || state.bad.contains(v) || (state.pendingLegacyDigest == nil && v == state.pending?.version) {
            state.package = package
            return nil
        }
        if v < state.highestVersion {
            throw AssetPatchError(.downgrade, "\(source): version \(v) is lower than version \(state.highestVersion) accepted before")
        }
        if let expires = manifest.expires, expires <= unixTime() {
            throw AssetPatchError(.expired, "\(source): version \(v) expired at \(RFC3339.format(expires))")
        }
        if let need = manifest.minAppVersion, let have = config.appVersion, let needParts = AppVersion.parse(need),
           AppVersion.compare(needParts, have) > 0 {
            throw AssetPatchError(.incompatible, "\(source): version \(v) needs app version \(need) or newer, this app is \(have.map(String.init).joined(separator: "."))")
        }
        if manifest.releaseBytes > config.maxReleaseBytes {
            throw AssetPatchError(.archive, "\(source): release of \(manifest.releaseBytes) bytes exceeds max_release_bytes (\(config.maxReleaseBytes))")
        }
        state.package = package
        state.highestVersion = max(state.highestVersion, v)
        return Candidate(manifest: manifest, archiveURL: archiveURL, version: v,
                         releaseID: Store.releaseID(version: v, digest: manifest.archiveDigest))
    }

    // MARK: Download

    func partialPath(_ c: Candidate) -> String { store.downloadsDir + "/" + c.manifest.archiveDigest + ".part" }
    func metaPath(_ c: Candidate) -> String { store.downloadsDir + "/" + c.manifest.archiveDigest + ".meta" }

    /// Bytes an update would still transfer for `c` (what is on disk already is not counted).
    func remainingBytes(_ c: Candidate) -> UInt64 {
        guard let total = c.manifest.archiveSize else { return 0 }
        let have = FS.fileSize(partialPath(c)) ?? 0
        return have <= total && FS.exists(metaPath(c)) ? total - have : total
    }

    /// Runs `body`, retrying network failures and 5xx answers with exponential backoff.
    func withRetries<T>(_ what: String, _ body: () throws -> T) throws -> T {
        var attempt = 0
        while true {
            do {
                return try body()
            } catch let e as AssetPatchError {
                let transient = e.transient
                guard transient, attempt < Updater.maxRetries else { throw e }
                attempt += 1
                let delay = UInt64(250) << UInt64(attempt - 1)
                log(2, "\(e.message); retry \(attempt) of \(Updater.maxRetries) in \(delay) ms")
                try cancel.sleep(ms: delay)
            }
        }
    }

    /// Downloads the archive into `downloads/<digest>.part`, resuming what is there, hashing as
    /// bytes arrive. Returns the path of the verified archive.
    func download(_ c: Candidate) throws -> String {
        let part = partialPath(c)
        let limit = c.manifest.archiveSize ?? config.maxReleaseBytes
        let total = c.manifest.archiveSize ?? 0
        let shown = URLs.redacted(c.archiveURL)
        progress.report(Progress(phase: .download, bytesDone: FS.fileSize(part) ?? 0, bytesTotal: total))

        let hash = try PartialHash(c.manifest.digestAlgorithm)
        let digestHex: String
        switch URLs.scheme(c.archiveURL) {
        case .file:
            digestHex = try copyLocal(c, to: part, limit: limit, hash: hash)
        default:
            digestHex = try withRetries("GET \(shown)") { try downloadHTTP(c, to: part, limit: limit, hash: hash) }
        }
        let size = FS.fileSize(part) ?? 0
        progress.report(Progress(phase: .download, bytesDone: size, bytesTotal: total == 0 ? size : total), final: true)
        if let expected = c.manifest.archiveSize, size != expected {
            discardPartial(c)
            throw AssetPatchError(.integrity, "\(shown): archive is \(size) bytes, the manifest says \(expected)")
        }
        if digestHex != c.manifest.archiveDigest {
            discardPartial(c)
            let algo = c.manifest.kind == .legacy ? "md5" : "sha256"
            throw AssetPatchError(.integrity, "\(shown): archive \(algo) is \(digestHex), the manifest says \(c.manifest.archiveDigest)")
        }
        return part
    }

    func discardPartial(_ c: Candidate) {
        try? FS.unlink(partialPath(c))
        try? FS.unlink(metaPath(c))
    }

    private func copyLocal(_ c: Candidate, to part: String, limit: UInt64, hash: PartialHash) throws -> String {
        guard let sourcePath = URLs.filePath(c.archiveURL) else { throw AssetPatchError(.manifest, "\(c.archiveURL): not a local file URL") }
        let source = try File.openRead(sourcePath)
        let sourceSize = try source.size()
        if sourceSize > limit {
            throw AssetPatchError(.integrity, "\(sourcePath): archive is \(sourceSize) bytes, more than the \(limit) expected")
        }
        let out = try File.open(part, O_RDWR | O_CREAT, mode: 0o644)
        try FS.writeAtomically(metaPath(c), Array("{\"url\":\"local\"}\n".utf8))
        var have = try out.size()
        if have > sourceSize { try out.truncate(to: 0); have = 0 }
        try hash.cover(out, length: have)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var offset = have
        let total = c.manifest.archiveSize ?? sourceSize
        while offset < sourceSize {
            try cancel.check()
            let n = try source.pread(into: buffer, at: offset)
            if n == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            try out.pwrite(chunk, at: offset)
            hash.update(chunk)
            offset += UInt64(n)
            progress.report(Progress(phase: .download, bytesDone: offset, bytesTotal: total))
        }
        return hash.finish()
    }

    private func downloadHTTP(_ c: Candidate, to part: String, limit: UInt64, hash: PartialHash) throws -> String {
        let shown = URLs.redacted(c.archiveURL)
        let out = try File.open(part, O_RDWR | O_CREAT, mode: 0o644)
        var restarts = 0
        while true {
            try cancel.check()
            var have = try out.size()
            var validator: String?
            if have > 0, let meta = try? FS.readFile(metaPath(c), limit: 65536), let json = try? JSONParser.parse(meta) {
                validator = json["etag"]?.string ?? json["last_modified"]?.string
            }
            if have > limit || validator == nil {
                // Nothing to resume against: without a validator a changed file can't be detected.
                try out.truncate(to: 0)
                have = 0
                validator = nil
            }
            // Within one update the hash carries over from the previous attempt; after a
            // process restart the kept prefix is read and hashed once.
            try hash.cover(out, length: have)
            if let expected = c.manifest.archiveSize, have == expected, expected > 0 {
                // Complete already (an earlier attempt stopped after downloading): no request.
                let hex = hash.finish()
                if hex == c.manifest.archiveDigest { return hex }
                log(2, "GET \(shown): the complete partial download does not match; downloading again")
                try out.truncate(to: 0)
                try? FS.unlink(metaPath(c))
                restarts += 1
                if restarts > 2 { return hex }
                continue
            }
            let resumeFrom = have
            var written = have
            var headers: [String] = []
            if resumeFrom > 0, let validator {
                headers = ["Range: bytes=\(resumeFrom)-", "If-Range: \(validator)"]
                log(1, "GET \(shown): resuming at byte \(resumeFrom)")
            }
            let expectedTotal = c.manifest.archiveSize
            do {
                _ = try http.get(c.archiveURL, extraHeaders: headers, onHead: { head in
                    switch head.status {
                    case 206 where resumeFrom > 0:
                        guard let range = head.header("Content-Range").flatMap(ContentRange.parse),
                              range.start == resumeFrom, range.end + 1 == range.total,
                              expectedTotal == nil || range.total == expectedTotal! else {
                            throw RestartDownload(reason: "unexpected Content-Range \(head.header("Content-Range") ?? "(none)")")
                        }
                    case 200:
                        let length = head.header("Content-Length").flatMap { UInt64($0) }
                        if resumeFrom > 0 {
                            // Only a whole archive may replace the bytes we have: a captive portal's
                            // page (wrong length, HTML) must not cost the partial download.
                            let type = head.header("Content-Type")?.lowercased() ?? ""
                            if type.hasPrefix("text/html") || (expectedTotal != nil && length != nil && length != expectedTotal) {
                                throw AssetPatchError(.http, "GET \(shown): HTTP 200 with \(length.map(String.init) ?? "unknown") bytes of \(type.isEmpty ? "unknown type" : type) instead of the archive; keeping the \(resumeFrom) bytes downloaded")
                            }
                            self.log(1, "GET \(shown): server sent the whole file; starting over")
                        }
                        try out.truncate(to: 0)
                        written = 0
                        hash.reset()
                        // An announced length is not trusted either way: the sink enforces the limit
                        // on the bytes that actually arrive.
                        var meta: [(String, JSON)] = [("url", .string(c.archiveURL))]
                        if let etag = head.header("ETag"), !etag.hasPrefix("W/") { meta.append(("etag", .string(etag))) }
                        if let lm = head.header("Last-Modified") { meta.append(("last_modified", .string(lm))) }
                        try FS.writeAtomically(self.metaPath(c), Array(JSON.object(meta).serialized().utf8))
                    case 416:
                        throw RestartDownload(reason: "HTTP 416")
                    default:
                        throw AssetPatchError(.http, "GET \(shown): HTTP \(head.status)", transient: head.status >= 500)
                    }
                }, sink: { chunk in
                    if written + UInt64(chunk.count) > limit {
                        throw AssetPatchError(.integrity, "GET \(shown): archive is longer than the \(limit) bytes expected")
                    }
                    try out.pwrite(chunk, at: written)
                    hash.update(chunk)
                    written += UInt64(chunk.count)
                }, progress: { _ in
                    self.progress.report(Progress(phase: .download, bytesDone: written, bytesTotal: expectedTotal ?? 0))
                })
            } catch let r as RestartDownload {
                restarts += 1
                log(2, "GET \(shown): \(r.reason); restarting the download from byte 0")
                try out.truncate(to: 0)
                try? FS.unlink(metaPath(c))
                if restarts > 2 { throw AssetPatchError(.http, "GET \(shown): \(r.reason) (range requests keep failing)") }
                continue
            }
            return hash.finish()
        }
    }

    // MARK: Install

    /// Extracts and verifies the archive into `staging/<id>/`, returning the release record.
    func install(_ c: Candidate, archive: String) throws -> ReleaseInfo {
        let stage = store.stagingDir + "/" + c.releaseID
        try FS.removeTree(stage)
        try FS.makeDirectories(stage + "/files")
        let shown = URLs.redacted(c.archiveURL)
        let zip = try ZipReader(path: archive, source: shown)
        let entries: [ZipEntry]
        var expected: [String: ManifestFile] = [:]
        if c.manifest.kind == .format1 {
            entries = try zip.fileEntries(matching: c.manifest.files)
            for f in c.manifest.files { expected[f.path] = f }
        } else {
            // Legacy: no file list, so the archive's own declarations are bounded here.
            entries = zip.fileEntries
            var sum: UInt64 = 0
            for e in entries {
                let (s, o) = sum.addingReportingOverflow(e.uncompressedSize)
                if o || s > config.maxReleaseBytes {
                    throw AssetPatchError(.archive, "\(shown): entries declare more than max_release_bytes (\(config.maxReleaseBytes))")
                }
                sum = s
            }
            if let conflict = ResourceName.fileDirectoryConflict(in: Set(entries.map(\.name))) {
                throw AssetPatchError(.archive, "\(shown): \"\(conflict)\" is both a file and a directory")
            }
        }

        let totalBytes = entries.reduce(UInt64(0)) { $0 + $1.uncompressedSize }
        var bytesDone: UInt64 = 0
        var files: [ManifestFile] = []
        files.reserveCapacity(entries.count)
        var madeDirs = Set<String>()
        let buffers = ZipBuffers()
        progress.report(Progress(phase: .install, bytesDone: 0, bytesTotal: totalBytes, filesDone: 0, filesTotal: UInt64(entries.count)))
        for (i, e) in entries.enumerated() {
            try cancel.check()
            let target = stage + "/files/" + e.name
            if let dir = e.name.beforeLastSlash {
                if !madeDirs.contains(dir) {
                    try FS.makeDirectories(stage + "/files/" + dir)
                    madeDirs.insert(dir)
                }
            }
            // O_EXCL|O_NOFOLLOW: never write through something already there.
            let out = try File.open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
            let digest = try Digest(.sha256)
            var written: UInt64 = 0
            try zip.extract(e, buffers: buffers) { chunk in
                try out.write(chunk)
                digest.update(chunk)
                written += UInt64(chunk.count)
                self.progress.report(Progress(phase: .install, bytesDone: bytesDone + written, bytesTotal: totalBytes,
                                              filesDone: UInt64(i), filesTotal: UInt64(entries.count)))
            }
            let sha = digest.finalHex()
            if let f = expected[e.name], f.sha256 != sha {
                throw AssetPatchError(.integrity, "\(shown): entry \"\(e.name)\" has sha256 \(sha), the manifest says \(f.sha256)")
            }
            bytesDone += written
            files.append(ManifestFile(path: e.name, size: written, sha256: sha))
        }
        progress.report(Progress(phase: .install, bytesDone: bytesDone, bytesTotal: totalBytes,
                                 filesDone: UInt64(entries.count), filesTotal: UInt64(entries.count)), final: true)

        let info = ReleaseInfo(version: c.version, files: c.manifest.kind == .format1 ? c.manifest.files : files,
                               plugins: c.manifest.plugins, signatureVerified: c.manifest.signatureVerified,
                               archiveDigest: c.manifest.archiveDigest, label: c.manifest.label)
        try FS.writeAtomically(stage + "/release.json", Array(info.toJSON().serialized().utf8))
        // The names alone, NUL-separated: what an open reads to build the resolve index.
        var names: [UInt8] = []
        for f in info.files { names += f.path.utf8; names.append(0) }
        try FS.writeAtomically(stage + "/names", names)
        // One syncfs makes every extracted file and directory durable before the state can
        // name the release (far cheaper than an fsync per file).
        let dirFD = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD < 0 { throw ioError("open", stage) }
        defer { close(dirFD) }
        if let e = FaultInjection.check("syncfs") { throw ioError("syncfs", stage, e) }
        if assetpatch_syncfs(dirFD) != 0 { throw ioError("syncfs", stage) }
        return info
    }

    // MARK: Activate

    /// Moves the staged release into place and switches the state to it (one atomic rename).
    func activate(_ c: Candidate, state: inout StoreState) throws {
        progress.report(Progress(phase: .activate))
        let stage = store.stagingDir + "/" + c.releaseID
        let target = store.releaseDir(c.releaseID)
        if FS.exists(target) {
            let live = [state.active, state.pending].compactMap { $0 } + state.kept
            if live.contains(where: { $0.id == c.releaseID }) {
                throw AssetPatchError(.state, "release \(c.releaseID) is already installed")
            }
            try FS.removeTree(target)
        }
        try FS.rename(stage, target)
        try FS.syncDirectory(store.releasesDir)

        let ref = ReleaseRef(id: c.releaseID, version: c.version)
        let legacyDigest = c.manifest.kind == .legacy ? c.manifest.archiveDigest : nil
        var next = state
        switch config.apply {
        case .immediate:
            if let old = next.active { next.kept.insert(old, at: 0) }
            next.active = ref
            next.activeLegacyDigest = legacyDigest
        case .nextOpen:
            next.pending = ref
            next.pendingLegacyDigest = legacyDigest
        }
        next.kept = Array(next.kept.filter { $0.id != ref.id }.prefix(config.keepVersions))
        next.highestInstalled = max(next.highestInstalled, c.version)
        try store.save(next)
        state = next
        discardPartial(c)
        do { try store.collectGarbage(state) } catch let e as AssetPatchError {
            log(2, "cleaning up old releases: \(e.message)")
        }
        progress.report(Progress(phase: .activate), final: true)
    }
}

/// `Content-Range: bytes START-END/TOTAL` (RFC 9110 section 14.4).
enum ContentRange {
    static func parse(_ value: String) -> (start: UInt64, end: UInt64, total: UInt64)? {
        let v = value.trimmingCharacters(in: " ")
        guard v.hasPrefix("bytes ") else { return nil }
        let rest = v.dropFirst(6)
        guard let dash = rest.firstIndex(of: "-"), let slash = rest.firstIndex(of: "/"), dash < slash,
              let start = UInt64(rest[..<dash]), let end = UInt64(rest[rest.index(after: dash)..<slash]),
              let total = UInt64(rest[rest.index(after: slash)...]), start <= end, end < total else { return nil }
        return (start, end, total)
    }
}
