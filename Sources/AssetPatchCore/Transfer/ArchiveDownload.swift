import Glibc

/// The running digest of a partial download and how many of its bytes it covers. Kept across
/// the retries of one update, so a retry re-reads the partial file only when the file no longer
/// matches what was hashed (a restart, or a write that failed half-way).
final class PartialHash {
    private let digest: Digest
    private(set) var count: UInt64 = 0
    /// false: nothing is hashed (`update` and `cover` do nothing) and `finish` returns "".
    var enabled = true

    init(_ algorithm: Digest.Algorithm) throws {
        digest = try Digest(algorithm)
    }

    func update(_ chunk: UnsafeRawBufferPointer) {
        guard enabled else { return }
        digest.update(chunk)
        count += UInt64(chunk.count)
    }

    func reset() {
        digest.reset()
        count = 0
    }

    /// Makes the digest cover exactly the first `length` bytes of `file`.
    func cover(_ file: File, length: UInt64) throws {
        if !enabled || count == length { return }
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
        guard enabled else { return "" }
        let hex = digest.finalHex()
        reset()
        return hex
    }
}

/// What `downloads/<digest>.meta` records about the partial download next to it: where its
/// bytes came from, so that a resume asks for the same representation (RFC 9110 If-Range).
struct PartialMeta: Equatable {
    var url: String
    /// A strong ETag, else the Last-Modified date: the If-Range validator.
    var validator: String?
    /// The Content-Encoding the bytes were decoded from; nil for identity. Decoded bytes can't
    /// be resumed with ranges of the encoded representation.
    var coding: String?

    /// The validator a resume may use: none for decoded bytes or without a validator.
    var resumeValidator: String? { coding == nil ? validator : nil }

    func toJSON() -> JSON {
        var pairs: [(String, JSON)] = [("url", .string(url))]
        if let validator { pairs.append(("validator", .string(validator))) }
        if let coding { pairs.append(("coding", .string(coding))) }
        return .object(pairs)
    }

    static func from(_ bytes: [UInt8]) -> PartialMeta? {
        guard let json = try? JSONParser.parse(bytes), let url = json["url"]?.string else { return nil }
        // Records of releases up to 0.1 kept the validator as "etag" or "last_modified".
        let validator = json["validator"]?.string ?? json["etag"]?.string ?? json["last_modified"]?.string
        return PartialMeta(url: url, validator: validator, coding: json["coding"]?.string)
    }
}

/// Raised inside a download when the server's answer means "start again from byte 0".
private struct RestartDownload: Error {
    let reason: String
}

/// Fetches one release archive into `downloads/<digest>.part`: resuming what an earlier attempt
/// left (Range + If-Range), hashing every byte as it arrives, never keeping more than `limit`
/// bytes. One object per attempt sequence of one update; it runs on the updating thread.
final class ArchiveDownload {
    let store: Store
    let source: Location
    let digest: String
    let algorithm: Digest.Algorithm
    /// The manifest's size of the archive (format 1); nil for legacy manifests.
    let expectedSize: UInt64?
    /// At most this many bytes are kept; more is `limitError`.
    let limit: UInt64
    let limitError: (UInt64) -> AssetPatchError
    let context: FetchContext
    var http: HTTPClient { context.http }
    var cancel: CancelToken { context.cancel }
    var progress: ProgressReporter { context.progress }
    var log: (LogLevel, String) -> Void { context.log }
    let hash: PartialHash
    /// Told how far the partial file holds downloaded bytes, after every write and truncation
    /// (an `ArchiveFollower` extracting behind the download).
    var onWritten: ((UInt64) -> Void)?
    /// Whether the download hashes the archive as it arrives. An update whose workers verify
    /// every file by its own sha256 as the archive arrives turns it off: the archive's digest
    /// is then taken only when a file must be read from the archive itself (`Updater.verifyArchive`),
    /// and `attempt` returns an empty digest.
    var hashing: Bool {
        get { hash.enabled }
        set { hash.enabled = newValue }
    }

    /// libcurl's receive buffer for the archive: fewer, larger writes and follower wake-ups
    /// than one per 16 KiB (a 200 MiB archive took 11,000 of each). 256 KiB was no faster
    /// and 128 KiB more at the update's peak memory.
    static let receiveBuffer = 128 << 10

    var partPath: String { store.partialPath(digest) }
    var metaPath: String { store.partialMetaPath(digest) }

    init(store: Store, source: Location, digest: String, algorithm: Digest.Algorithm, expectedSize: UInt64?, limit: UInt64,
         limitError: @escaping (UInt64) -> AssetPatchError, context: FetchContext) throws {
        self.store = store
        self.source = source
        self.digest = digest
        self.algorithm = algorithm
        self.expectedSize = expectedSize
        self.limit = limit
        self.limitError = limitError
        self.context = context
        self.hash = try PartialHash(algorithm)
    }

    /// The partial's record, if it is there and readable.
    func loadMeta() -> PartialMeta? {
        (try? FS.readFile(metaPath, limit: 65536, followLinks: false)).flatMap(PartialMeta.from)
    }

    /// Bytes on disk that a resume can keep.
    func resumableBytes() -> UInt64 {
        guard let have = FS.fileSize(partPath), have > 0, let meta = loadMeta() else { return 0 }
        switch source {
        case .file: return have
        case .http: return resumable(meta) ? have : 0
        }
    }

    /// Whether the archive is named by its content: a format-1 manifest gives its size and
    /// sha256, and the whole file is checked against them. Such an archive resumes with `Range`
    /// alone: another origin node's copy (same bytes, other modification time) or a proxy that
    /// strips validators must not cost a restart, and a wrong splice costs one restart, never a
    /// wrong file. A legacy archive, replaced in place at its URL, resumes only with `If-Range`.
    var contentAddressed: Bool { expectedSize != nil }

    /// Whether a partial fetched as `meta` says can be resumed with a range.
    private func resumable(_ meta: PartialMeta) -> Bool {
        guard meta.coding == nil else { return false }  // decoded bytes: not a range of the file
        return contentAddressed || meta.resumeValidator != nil
    }

    /// One attempt: the whole archive or what is missing of it. Returns the digest's hex of
    /// the complete file (the caller compares it with the manifest). A full disk drops the
    /// partial download: it could not complete here, and its bytes are better given back to
    /// the app and to the state that must still be written.
    func attempt() throws -> String {
        do {
            switch source {
            case let .file(path, _): return try copyLocal(from: path)
            case let .http(url):
                guard let sources = context.sources else { return try fetchHTTP(url) }
                return try fetchFromSources(sources, url)
            }
        } catch let e as AssetPatchError where e.isDiskFull {
            store.discardPartial(digest)
            onWritten?(0)
            hash.reset()
            log(.warning, "\(source.shown): \(e.message); the partial download is dropped")
            throw e
        }
    }

    /// The source the last attempt read from (with several sources).
    var servedBy: Int?

    /// Bytes written since the free space was last looked at (downloads of unknown size).
    private var sinceReserveCheck: UInt64 = 0

    /// A download of unknown size (a legacy archive) stops before it eats into the file
    /// system's reserve (`Store.requireReserve`), looking every 4 MiB.
    private func checkReserve(after bytes: Int) throws {
        guard expectedSize == nil else { return }
        sinceReserveCheck += UInt64(bytes)
        if sinceReserveCheck >= 4 << 20 {
            sinceReserveCheck = 0
            try store.requireReserve(for: "the download of \(source.shown)")
        }
    }

    // MARK: file://

    private func copyLocal(from sourcePath: String) throws -> String {
        let source = try File.openRead(sourcePath)
        let sourceSize = try source.size()
        if sourceSize > limit { throw limitError(sourceSize) }
        let out = try File.open(partPath, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
        try FS.writeAtomically(metaPath, Array(PartialMeta(url: self.source.url).toJSON().serialized().utf8))
        var have = try out.size()
        if have > sourceSize { try out.truncate(to: 0); have = 0 }
        onWritten?(have)
        try hash.cover(out, length: have)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var offset = have
        let total = expectedSize ?? sourceSize
        while offset < sourceSize {
            try cancel.check()
            let n = try source.pread(into: buffer, at: offset)
            if n == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            try checkReserve(after: n)
            try out.pwrite(chunk, at: offset)
            hash.update(chunk)
            offset += UInt64(n)
            onWritten?(offset)
            progress.report(Progress(phase: .download, bytesDone: offset, bytesTotal: total))
        }
        return hash.finish()
    }

    // MARK: http(s)

    /// What to ask the server for: the whole archive, or the rest of it after `from` bytes,
    /// with `If-Range` when a validator must vouch for the bytes already here.
    private struct Request {
        var from: UInt64
        var validator: String?
        var headers: [String] {
            guard from > 0 else { return [] }
            return ["Range: bytes=\(from)-"] + (validator.map { ["If-Range: \($0)"] } ?? [])
        }
    }

    /// Decides the request from what is on disk: resume a content-addressed archive with a
    /// range, a legacy one only with a validator to send (so a changed file is noticed);
    /// otherwise start from zero, saying why.
    private func decideRequest(_ out: File) throws -> Request {
        let have = try out.size()
        guard have > 0 else { return Request(from: 0, validator: nil) }
        let meta = loadMeta()
        if have <= limit, let meta, resumable(meta) {
            return Request(from: have, validator: contentAddressed ? nil : meta.resumeValidator)
        }
        let why = have > limit ? "it is longer than the archive can be"
            : meta == nil ? "its record is missing"
            : meta?.coding != nil ? "its bytes were decoded from a \(meta!.coding!) encoding, not a range of the file"
            : "the server gave no validator to resume a legacy archive with"
        log(.warning, "GET \(source.shown): restarting the download from byte 0: the \(have) bytes on disk can't be resumed (\(why))")
        try out.truncate(to: 0)
        return Request(from: 0, validator: nil)
    }

    /// How the body of an accepted response is written.
    private struct Sink {
        var offset: UInt64
        var decoder: ContentDecoder?
        /// A 206 appended to bytes already on disk.
        var spliced = false
    }

    /// Judges the response head before any body byte: a matching 206 appends, a 200 replaces
    /// the partial (when it looks like the archive), anything else is an error or a restart.
    private func judgeHead(_ head: ResponseHead, _ request: Request, _ out: File, _ what: String) throws -> Sink {
        let coding = try ContentDecoder.coding(of: head, what)
        switch head.status {
        case 206 where request.from > 0:
            // A range of an encoded representation can't be spliced onto decoded bytes.
            if let coding { throw RestartDownload(reason: "a range came with Content-Encoding \(coding)") }
            guard let range = head.header("Content-Range").flatMap(ContentRange.parse),
                  range.start == request.from, range.end + 1 == range.total,
                  expectedSize == nil || range.total == expectedSize! else {
                throw RestartDownload(reason: "unexpected Content-Range \(head.header("Content-Range") ?? "(none)")")
            }
            return Sink(offset: request.from, decoder: nil, spliced: true)
        case 200:
            let length = coding == nil ? head.contentLength : nil
            if request.from > 0 {
                // Only a whole archive may replace the bytes we have: a captive portal's page
                // (wrong length, HTML) must not cost the partial download.
                let type = head.header("Content-Type")?.lowercased() ?? ""
                if type.hasPrefix("text/html") || (expectedSize != nil && length != nil && length != expectedSize) {
                    throw AssetPatchError(.http, "\(what): HTTP 200 with \(head.contentLength.map(String.init) ?? "unknown") bytes of \(type.isEmpty ? "unknown type" : type) instead of the archive; keeping the \(request.from) bytes downloaded")
                }
                log(.warning, "\(what): restarting the download from byte 0: the server answered the range with the whole file (200)")
            }
            // Only a file with bytes in it is truncated: ext4 takes a truncation to zero for a
            // file about to be replaced and writes the whole new content out when it is closed
            // (auto_da_alloc), which for an archive deleted right after the update is 170 MiB of
            // writes for nothing, competing with the release's own.
            if try out.size() > 0 { try out.truncate(to: 0) }
            onWritten?(0)
            hash.reset()
            // An announced length is not trusted either way: the sink enforces the limit on the
            // bytes that actually arrive.
            // A legacy archive is replaced in place at its URL: a racy validator (the file written
            // within the second it was served) could match a later file of the same size, and a
            // resume would splice the two (see `Validators`). A format-1 archive is checked
            // against the size and sha256 the manifest gives, and publishers name it by them.
            let validator = expectedSize == nil ? Validators.reusable(head)?.ifRange : Validators.any(head)?.ifRange
            if validator == nil, head.header("ETag") != nil || head.header("Last-Modified") != nil {
                log(.debug, "\(what): the response's validators are too recent to rely on; an interruption restarts this download")
            }
            let meta = PartialMeta(url: source.url, validator: validator, coding: coding)
            try FS.writeAtomically(metaPath, Array(meta.toJSON().serialized().utf8))
            return Sink(offset: 0, decoder: try coding.map { try ContentDecoder(coding: $0, what: what) })
        case 416:
            throw RestartDownload(reason: "HTTP 416")
        default:
            throw HTTPClient.statusError(head, what)
        }
    }

    /// Writes body bytes at the sink's offset (decoding them first when they are encoded),
    /// hashing them, never past the limit.
    private func write(_ chunk: UnsafeRawBufferPointer, _ sink: inout Sink, _ out: File) throws {
        func keep(_ bytes: UnsafeRawBufferPointer) throws {
            if sink.offset + UInt64(bytes.count) > limit { throw limitError(sink.offset + UInt64(bytes.count)) }
            try checkReserve(after: bytes.count)
            try out.pwrite(bytes, at: sink.offset)
            hash.update(bytes)
            sink.offset += UInt64(bytes.count)
            onWritten?(sink.offset)
        }
        if let decoder = sink.decoder { try decoder.decode(chunk, keep) } else { try keep(chunk) }
    }

    /// The archive from the first usable source that serves it, resuming what others sent
    /// (the archive is named by its hash and checked whole); a source that fails is demoted and
    /// the next one goes on from the byte reached.
    private func fetchFromSources(_ sources: Sources, _ url: String) throws -> String {
        sources.revive()
        let locations = sources.locations(for: source)
        var lastError: (any Error)?
        var tried = Set<String>()
        for i in sources.usable() {
            guard case let .http(mirrored)? = locations[i], tried.insert(mirrored).inserted else { continue }
            do {
                sources.started(i)
                servedBy = i
                let hex = try fetchHTTP(mirrored)
                if hashing && hex != digest && sources.usable().contains(where: { $0 != i && locations[$0] != nil }) {
                    // Bytes that are not the archive: none is kept, and the next source sends it whole.
                    store.discardPartial(digest)
                    onWritten?(0)
                    hash.reset()
                    sources.demote(i, "sent an archive whose sha256 is \(hex), not \(digest)")
                    lastError = AssetPatchError(.integrity, "GET \(URLs.redacted(mirrored)): archive sha256 is \(hex), the manifest says \(digest)")
                    continue
                }
                sources.delivered(i, bytes: 0, "served the archive")
                return hex
            } catch let e as AssetPatchError where [.cancelled, .io, .internal].contains(e.status) || e.released {
                throw e  // not the source's failure
            } catch {
                sources.demote(i, SourceSpread.describe(error))
                lastError = error
            }
        }
        throw lastError ?? AssetPatchError(.network, "no source serves \(source.shown)")
    }

    private func fetchHTTP(_ url: String) throws -> String {
        let what = "GET \(URLs.redacted(url))"
        let out = try File.open(partPath, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
        var restarts = 0
        while true {
            try cancel.check()
            let request = try decideRequest(out)
            onWritten?(request.from)
            // Within one update the hash carries over from the previous attempt; after a
            // process restart the kept prefix is read and hashed once.
            try hash.cover(out, length: request.from)
            if let expected = expectedSize, request.from == expected, expected > 0 {
                // Complete already (an earlier attempt stopped after downloading): no request.
                if !hashing { return "" }
                let hex = hash.finish()
                if hex == digest { return hex }
                log(.warning, "\(what): the complete partial download does not match; downloading again")
                try out.truncate(to: 0)
                try? FS.unlink(metaPath)
                restarts += 1
                if restarts > 2 { return hex }
                continue
            }
            if request.from > 0 { log(.info, "\(what): resuming at byte \(request.from)") }
            var sink = Sink(offset: request.from, decoder: nil)
            do {
                _ = try http.get(url, extraHeaders: request.headers, receiveBuffer: ArchiveDownload.receiveBuffer, onHead: { head in
                    sink = try self.judgeHead(head, request, out, what)
                }, sink: { chunk in
                    try self.write(chunk, &sink, out)
                }, progress: { _ in
                    self.progress.report(Progress(phase: .download, bytesDone: sink.offset, bytesTotal: self.expectedSize ?? 0))
                })
                if let decoder = sink.decoder, !decoder.ended {
                    throw AssetPatchError(.network, "\(what): the encoded body ended early", transient: true)
                }
                if hashing, sink.spliced, expectedSize == nil || sink.offset == expectedSize {
                    // Bytes resumed onto others: the whole file's digest tells whether they
                    // belong together. A wrong splice (a server that changed the file without
                    // saying so) costs one restart, never a wrong file.
                    let hex = hash.finish()
                    if hex == digest || restarts >= 2 { return hex }
                    throw RestartDownload(reason: "the bytes resumed at \(request.from) do not complete the archive's digest (the server's file changed)")
                }
            } catch let r as RestartDownload {
                restarts += 1
                log(.warning, "\(what): \(r.reason); restarting the download from byte 0")
                try out.truncate(to: 0)
                try? FS.unlink(metaPath)
                if restarts > 2 { throw AssetPatchError(.http, "\(what): \(r.reason) (range requests keep failing)") }
                continue
            }
            return hash.finish()
        }
    }
}
