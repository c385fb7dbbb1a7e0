import Glibc
internal import CCurl
internal import CZlib

/// Connection settings shared by every request of one update.
public struct HTTPSettings: Sendable {
    public var connectTimeoutMs: Int = 10_000
    public var stallTimeoutMs: Int = 30_000
    public var caFile: String?
    public var headers: [String] = []
    public var userAgent: String = "assetpatch/\(AssetPatchVersion.string)"
    /// TCP_QUICKACK on every connection and after every response head (see `tcp_quickack`).
    public var quickAck = true

    public init() {}
}

/// One HTTP response's head, as the header callback saw it (the last response after redirects).
public struct ResponseHead: Sendable {
    public var status = 0
    public var headers: [(String, String)] = []
    /// The URL that answered, after redirects.
    public var effectiveURL = ""

    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.last { $0.0.lowercased() == lower }?.1
    }

    /// The Content-Length, when the server announced one.
    public var contentLength: UInt64? { header("Content-Length").flatMap { UInt64($0.trimmingCharacters(in: " \t")) } }
}

/// What a request asks of the server's representation.
public enum ContentCodings: Sendable {
    /// `Accept-Encoding: identity`, and no decoding by libcurl: the body's bytes arrive as sent,
    /// so that a caller resuming with ranges sees exactly which representation it gets.
    case identity
    /// Every coding libcurl can decode is offered, and libcurl decodes the body.
    case decoded
}

private let curlGlobalInit: Int32 = {
    curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    return 0
}()

/// State shared with libcurl's C callbacks for one transfer; reached through an opaque pointer.
final class TransferContext {
    var head = ResponseHead()
    var started = false
    /// Called once with the final response head, before any body byte; throws to refuse it.
    var onHead: (ResponseHead) throws -> Void = { _ in }
    var sink: (UnsafeRawBufferPointer) throws -> Void = { _ in }
    var error: (any Error)?
    var bodyBytes: UInt64 = 0
    var lastActivity = monotonicMillis()
    var easy: UnsafeMutableRawPointer?
    var quickAck = false

    func begin() -> Bool {
        if started { return true }
        started = true
        do { try onHead(head) } catch {
            self.error = error
            return false
        }
        return true
    }
}

private let writeCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    guard let user, let ptr else { return 0 }
    let ctx = Unmanaged<TransferContext>.fromOpaque(user).takeUnretainedValue()
    let n = size * count
    ctx.lastActivity = monotonicMillis()
    if !ctx.begin() { return 0 }
    do {
        try ctx.sink(UnsafeRawBufferPointer(start: ptr, count: n))
    } catch {
        ctx.error = error
        return 0
    }
    ctx.bodyBytes += UInt64(n)
    return n
}

private let headerCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    guard let user, let ptr else { return 0 }
    let ctx = Unmanaged<TransferContext>.fromOpaque(user).takeUnretainedValue()
    let n = size * count
    ctx.lastActivity = monotonicMillis()
    let line = String(decoding: UnsafeRawBufferPointer(start: ptr, count: n), as: UTF8.self)
        .trimmingCharacters(in: " \t\r\n")
    if line.isEmpty, ctx.quickAck, let easy = ctx.easy {
        // The head is complete: acknowledge it now rather than after the delayed-ACK timer, so a
        // server that holds the body back until its head is acknowledged (Nagle) sends it at once.
        ccurl_quickack(easy)
    }
    if line.hasPrefix("HTTP/") {
        // A new response (a redirect's target, or after a 1xx): forget the previous head.
        let parts = line.split(separator: " ", maxSplits: 2)
        ctx.head = ResponseHead(status: parts.count > 1 ? Int(parts[1]) ?? 0 : 0, headers: [])
    } else if let colon = line.firstIndex(of: ":") {
        let name = String(line[..<colon]).trimmingCharacters(in: " \t")
        let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: " \t")
        if ctx.head.headers.count < 200 { ctx.head.headers.append((name, value)) }
    }
    return n
}

extension String {
    public func trimmingCharacters(in set: String) -> String {
        let chars = Set(set.unicodeScalars)
        var scalars = Substring(self).unicodeScalars[...]
        while let f = scalars.first, chars.contains(f) { scalars.removeFirst() }
        while let l = scalars.last, chars.contains(l) { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }
}

/// One configured libcurl easy handle and the state its callbacks share.
final class Transfer {
    let easy: UnsafeMutableRawPointer
    let ctx = TransferContext()
    let what: String
    let url: String
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var list: UnsafeMutablePointer<curl_slist>?
    private let onEnd: () throws -> Void

    init(_ method: String, _ url: String, settings: HTTPSettings, extraHeaders: [String], codings: ContentCodings,
         onHead: @escaping (ResponseHead) throws -> Void, sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
         onEnd: @escaping () throws -> Void = {}) throws {
        what = "\(method) \(URLs.redacted(url))"
        self.url = url
        self.onEnd = onEnd
        guard let easy = curl_easy_init() else { throw AssetPatchError(.internal, "curl_easy_init failed") }
        self.easy = easy
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        ctx.onHead = onHead
        ctx.sink = sink
        ctx.easy = easy
        ctx.quickAck = settings.quickAck

        var headers = settings.headers + extraHeaders
        // Without Accept-Encoding any coding is acceptable (RFC 9110 section 12.5.3): ask for identity.
        if codings == .identity { headers.append("Accept-Encoding: identity") }
        for h in headers {
            guard let appended = curl_slist_append(list, h) else { throw AssetPatchError(.internal, "curl_slist_append failed") }
            list = appended
        }
        let ctxPointer = Unmanaged.passUnretained(ctx).toOpaque()
        var rc = CURLE_OK
        func set(_ r: CURLcode) { if rc == CURLE_OK { rc = r } }
        set(ccurl_setopt_ptr(easy, CURLOPT_URL, url))
        set(ccurl_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        set(ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        // Only http(s), also after redirects: a redirect to file:// must not read local files.
        set(ccurl_setopt_ptr(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(ccurl_setopt_ptr(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"))
        set(ccurl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1))
        set(ccurl_setopt_long(easy, CURLOPT_MAXREDIRS, 5))
        set(ccurl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1))
        set(ccurl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2))
        if let ca = settings.caFile { set(ccurl_setopt_ptr(easy, CURLOPT_CAINFO, ca)) }
        set(ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, settings.connectTimeoutMs))
        set(ccurl_setopt_ptr(easy, CURLOPT_USERAGENT, settings.userAgent))
        switch codings {
        case .identity: set(ccurl_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0))
        case .decoded: set(ccurl_setopt_ptr(easy, CURLOPT_ACCEPT_ENCODING, ""))  // "": every coding libcurl has
        }
        if method == "HEAD" { set(ccurl_setopt_long(easy, CURLOPT_NOBODY, 1)) }
        if let list { set(ccurl_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)) }
        if settings.quickAck { set(ccurl_setopt_quickack_sockets(easy)) }
        set(ccurl_setopt_write(easy, writeCallback))
        set(ccurl_setopt_ptr(easy, CURLOPT_WRITEDATA, ctxPointer))
        set(ccurl_setopt_header(easy, headerCallback))
        set(ccurl_setopt_ptr(easy, CURLOPT_HEADERDATA, ctxPointer))
        guard rc == CURLE_OK else {
            throw AssetPatchError(.internal, "\(what): curl option rejected: \(String(cString: curl_easy_strerror(rc)))")
        }
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(list)
        errorBuffer.deallocate()
    }

    /// Judges a finished transfer: a callback's own error (a refused response, a full disk)
    /// says more than curl's "failed writing received data"; then curl's result; then the
    /// head of an empty body, which never reached the write callback; then `onEnd`.
    func conclude(_ result: CURLcode) throws {
        if let error = ctx.error { throw error }
        if result != CURLE_OK {
            let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(result))
            throw AssetPatchError(.network, "\(what): \(detail)", transient: HTTPClient.isTransient(result))
        }
        if !ctx.begin(), let error = ctx.error { throw error }
        var code = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        ctx.head.status = code
        var effective: UnsafeMutablePointer<CChar>?
        _ = ccurl_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective)
        ctx.head.effectiveURL = effective.map { String(cString: $0) } ?? url
        try onEnd()
    }
}

/// HTTP(S) on libcurl's multi interface. Every transfer runs in a loop that wakes at least
/// every 50 ms, so cancellation and the stall timeout act promptly even when no byte moves.
///
/// Failures carry `transient` for what a retry may fix (see `AssetPatchError`): libcurl's
/// connection, timeout and transfer errors and 5xx answers are transient; a redirect loop, a
/// redirect to another scheme, TLS verification and other 4xx answers are not. A 429 is
/// transient when it says when to retry (Retry-After).
public final class HTTPClient {
    let settings: HTTPSettings
    let cancel: CancelToken

    public init(settings: HTTPSettings, cancel: CancelToken) {
        _ = curlGlobalInit
        self.settings = settings
        self.cancel = cancel
    }

    /// Performs one GET. `extraHeaders` are added to the configured ones. `onHead` sees the
    /// final response head before any body byte and may throw to refuse the body; `sink`
    /// receives the body. `progress` is called from the loop (not from libcurl) with the body
    /// bytes so far.
    public func get(_ url: String, extraHeaders: [String] = [], codings: ContentCodings = .identity,
                    onHead: @escaping (ResponseHead) throws -> Void,
                    sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
                    progress: ((UInt64) -> Void)? = nil) throws -> ResponseHead {
        try perform("GET", url, extraHeaders: extraHeaders, codings: codings, onHead: onHead, sink: sink, progress: progress)
    }

    /// Performs one HEAD and returns the final response head, whatever its status.
    public func head(_ url: String, extraHeaders: [String] = []) throws -> ResponseHead {
        try perform("HEAD", url, extraHeaders: extraHeaders, codings: .identity, onHead: { _ in }, sink: { _ in }, progress: nil)
    }

    private func perform(_ method: String, _ url: String, extraHeaders: [String], codings: ContentCodings,
                         onHead: @escaping (ResponseHead) throws -> Void,
                         sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
                         progress: ((UInt64) -> Void)?) throws -> ResponseHead {
        let t = try Transfer(method, url, settings: settings, extraHeaders: extraHeaders, codings: codings, onHead: onHead, sink: sink)
        try run([t], parallel: 1) { if let progress { progress(t.ctx.bodyBytes) } }
        return t.ctx.head
    }

    /// One request of a batch: the headers to add, and what to do with the response.
    public struct Request {
        public var extraHeaders: [String]
        /// Sees the final response head before any body byte; throws to refuse the body.
        public var onHead: (ResponseHead) throws -> Void
        public var sink: (UnsafeRawBufferPointer) throws -> Void
        /// Called when the response ended without an error.
        public var onEnd: () throws -> Void

        public init(extraHeaders: [String], onHead: @escaping (ResponseHead) throws -> Void,
                    sink: @escaping (UnsafeRawBufferPointer) throws -> Void, onEnd: @escaping () throws -> Void) {
            self.extraHeaders = extraHeaders
            self.onHead = onHead
            self.sink = sink
            self.onEnd = onEnd
        }
    }

    /// Performs GETs of `url`, up to `parallel` at once over reused connections (one libcurl
    /// multi handle: its connection cache keeps connections open between requests). The first
    /// failure stops the batch and is thrown; requests that ended before it have had `onEnd`.
    /// `progress` is called from the loop, at least every 50 ms.
    public func getBatch(_ url: String, _ requests: [Request], parallel: Int, progress: () -> Void) throws {
        var next = 0
        try run(parallel: parallel, progress: progress) {
            guard next < requests.count else { return nil }
            let r = requests[next]
            next += 1
            return try Transfer("GET", url, settings: settings, extraHeaders: r.extraHeaders, codings: .identity,
                                onHead: r.onHead, sink: r.sink, onEnd: r.onEnd)
        }
    }

    private func run(_ transfers: [Transfer], parallel: Int, progress: () -> Void) throws {
        var i = 0
        try run(parallel: parallel, progress: progress) {
            defer { i += 1 }
            return i < transfers.count ? transfers[i] : nil
        }
    }

    /// The multi loop: keeps up to `parallel` transfers from `next` running, wakes at least every
    /// 50 ms for cancellation, stall detection and `progress`.
    private func run(parallel: Int, progress: () -> Void, next: () throws -> Transfer?) throws {
        guard let multi = curl_multi_init() else { throw AssetPatchError(.internal, "curl_multi_init failed") }
        defer { curl_multi_cleanup(multi) }
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, parallel))
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        defer { for t in active.values { curl_multi_remove_handle(multi, t.easy) } }
        var exhausted = false
        func fill() throws {
            while !exhausted && active.count < max(1, parallel) {
                guard let t = try next() else { exhausted = true; return }
                t.ctx.lastActivity = monotonicMillis()
                let rc = curl_multi_add_handle(multi, t.easy)
                if rc != CURLM_OK { throw AssetPatchError(.internal, "\(t.what): curl_multi_add_handle: \(String(cString: curl_multi_strerror(rc)))") }
                active[t.easy] = t
            }
        }
        try fill()
        while !active.isEmpty {
            var running: Int32 = 0
            let mrc = curl_multi_perform(multi, &running)
            if mrc != CURLM_OK { throw AssetPatchError(.internal, "curl_multi_perform: \(String(cString: curl_multi_strerror(mrc)))") }
            var queued: Int32 = 0
            var ended = false
            while let msg = curl_multi_info_read(multi, &queued) {
                guard msg.pointee.msg == CURLMSG_DONE, let easy = msg.pointee.easy_handle, let t = active[easy] else { continue }
                let result = msg.pointee.data.result
                curl_multi_remove_handle(multi, easy)
                active[easy] = nil
                try t.conclude(result)
                ended = true
            }
            if ended {
                try fill()
                progress()
                continue  // start the next requests at once
            }
            progress()
            if cancel.isCancelled {
                throw AssetPatchError(.cancelled, "\(active.values.first?.what ?? "transfer"): cancelled")
            }
            if settings.stallTimeoutMs > 0 {
                let now = monotonicMillis()
                for t in active.values where now - t.ctx.lastActivity > UInt64(settings.stallTimeoutMs) {
                    throw AssetPatchError(.network, "\(t.what): stalled, no data for \(settings.stallTimeoutMs) ms (after \(t.ctx.bodyBytes) body bytes)",
                                          transient: true)
                }
            }
            var fds: Int32 = 0
            curl_multi_poll(multi, nil, 0, 50, &fds)
        }
    }

    /// libcurl failures a retry can't fix: the request or the server's configuration is wrong.
    static func isTransient(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL,      // a redirect to a scheme other than http(s)
             CURLE_URL_MALFORMAT, CURLE_NOT_BUILT_IN,
             CURLE_TOO_MANY_REDIRECTS,        // a redirect loop stays a loop
             CURLE_PEER_FAILED_VERIFICATION,  // TLS: unknown CA, wrong name, expired certificate
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR,
             CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
             CURLE_BAD_CONTENT_ENCODING, CURLE_FILESIZE_EXCEEDED, CURLE_LOGIN_DENIED, CURLE_REMOTE_ACCESS_DENIED:
            return false
        default:
            return true
        }
    }

    /// Fetches a small body (the manifest) into memory, decoding any content coding, with a limit
    /// on the decoded bytes. Returns the final URL after redirects too: relative archive URLs
    /// resolve against it.
    public func fetch(_ url: String, limit: Int, limitStatus: Status) throws -> (body: [UInt8], finalURL: String) {
        let r = try fetch(url, limit: limit, limitStatus: limitStatus, ifNoneMatch: nil, ifModifiedSince: nil)
        return (r.body ?? [], r.finalURL)
    }

    /// A small body fetched conditionally: `body` is nil when the server answered 304 Not
    /// Modified to the validators given. `etag` and `lastModified` come from a 200's head.
    public func fetch(_ url: String, limit: Int, limitStatus: Status, ifNoneMatch: String?, ifModifiedSince: String?) throws
        -> (body: [UInt8]?, finalURL: String, etag: String?, lastModified: String?) {
        var body: [UInt8] = []
        let what = "GET \(URLs.redacted(url))"
        var headers: [String] = []
        if let ifNoneMatch { headers.append("If-None-Match: \(ifNoneMatch)") }
        if let ifModifiedSince { headers.append("If-Modified-Since: \(ifModifiedSince)") }
        let conditional = !headers.isEmpty
        let head = try get(url, extraHeaders: headers, codings: .decoded, onHead: { head in
            guard head.status == 200 || (conditional && head.status == 304) else { throw HTTPClient.statusError(head, what) }
        }, sink: { chunk in
            if body.count + chunk.count > limit {
                throw AssetPatchError(limitStatus, "\(what): response larger than the limit of \(limit) bytes")
            }
            body.append(contentsOf: chunk)
        })
        if head.status == 304 { return (nil, head.effectiveURL, nil, nil) }
        return (body, head.effectiveURL, head.header("ETag"), head.header("Last-Modified"))
    }

    /// The error for an unexpected HTTP status: transient for 5xx, and for 429 with a
    /// Retry-After; the server's Retry-After travels with it.
    static func statusError(_ head: ResponseHead, _ what: String) -> AssetPatchError {
        let retryAfter = head.header("Retry-After").flatMap { RetryAfter.milliseconds($0, now: unixTime()) }
        let transient = head.status >= 500 || (head.status == 429 && retryAfter != nil)
        var message = "\(what): HTTP \(head.status)"
        if let retryAfter { message += " (retry after \(retryAfter / 1000) s)" }
        return AssetPatchError(.http, message, transient: transient, retryAfterMs: retryAfter)
    }
}

/// `Retry-After` (RFC 9110 section 10.2.3): delay-seconds or an HTTP-date (IMF-fixdate).
enum RetryAfter {
    static func milliseconds(_ value: String, now: Int64) -> UInt64? {
        let v = value.trimmingCharacters(in: " \t")
        if !v.isEmpty, v.utf8.count <= 10, v.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let s = UInt64(v) {
            return s * 1000
        }
        guard let date = HTTPDate.parse(v) else { return nil }
        return date > now ? UInt64(date - now) * 1000 : 0
    }
}

/// IMF-fixdate, the HTTP-date every current server sends: `Sun, 06 Nov 1994 08:49:37 GMT`.
enum HTTPDate {
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func parse(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int(parts[1]), let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3]) else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let h = Int(time[0]), let m = Int(time[1]), let s = Int(time[2]),
              (1...31).contains(day), (0...23).contains(h), (0...59).contains(m), (0...60).contains(s) else { return nil }
        return Int64(RFC3339.daysFromCivil(year, month + 1, day)) * 86400 + Int64(h * 3600 + m * 60 + min(s, 59))
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

/// Decodes a response body sent with a gzip or deflate Content-Encoding (RFC 9110 section
/// 8.4.1), for requests that take the bytes as sent (`ContentCodings.identity`).
final class ContentDecoder {
    /// The response's content coding, nil for identity. Throws for codings this decoder lacks.
    static func coding(of head: ResponseHead, _ what: String) throws -> String? {
        guard let value = head.header("Content-Encoding") else { return nil }
        let codings = value.lowercased().split(separator: ",").map { String($0).trimmingCharacters(in: " \t") }.filter { $0 != "identity" && !$0.isEmpty }
        if codings.isEmpty { return nil }
        guard codings.count == 1, ["gzip", "x-gzip", "deflate"].contains(codings[0]) else {
            throw AssetPatchError(.http, "\(what): unsupported Content-Encoding \"\(value)\"")
        }
        return codings[0]
    }

    private let inflater: Inflater
    var ended: Bool { inflater.ended }
    let what: String

    init(coding: String, what: String) throws {
        self.what = what
        inflater = try Inflater(.zlibOrGzip)
    }

    /// Feeds encoded bytes, passing what they decode to `sink`.
    func decode(_ chunk: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        do { try inflater.push(chunk, sink) } catch let f as InflateFailure {
            switch f {
            case let .corrupt(m): throw AssetPatchError(.http, "\(what): the encoded body does not decode (\(m))")
            case .trailing, .overrun: throw AssetPatchError(.http, "\(what): data after the end of the encoded body")
            case .short: throw AssetPatchError(.http, "\(what): the encoded body ended early")
            }
        }
    }
}
