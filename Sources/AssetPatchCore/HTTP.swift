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
        let what = "\(method) \(URLs.redacted(url))"
        guard let easy = curl_easy_init() else { throw AssetPatchError(.internal, "curl_easy_init failed") }
        defer { curl_easy_cleanup(easy) }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }

        let ctx = TransferContext()
        ctx.onHead = onHead
        ctx.sink = sink
        let ctxPointer = Unmanaged.passUnretained(ctx).toOpaque()

        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        var headers = settings.headers + extraHeaders
        // Without Accept-Encoding any coding is acceptable (RFC 9110 section 12.5.3): ask for identity.
        if codings == .identity { headers.append("Accept-Encoding: identity") }
        for h in headers {
            guard let appended = curl_slist_append(list, h) else { throw AssetPatchError(.internal, "curl_slist_append failed") }
            list = appended
        }

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
        set(ccurl_setopt_write(easy, writeCallback))
        set(ccurl_setopt_ptr(easy, CURLOPT_WRITEDATA, ctxPointer))
        set(ccurl_setopt_header(easy, headerCallback))
        set(ccurl_setopt_ptr(easy, CURLOPT_HEADERDATA, ctxPointer))
        guard rc == CURLE_OK else {
            throw AssetPatchError(.internal, "\(what): curl option rejected: \(String(cString: curl_easy_strerror(rc)))")
        }

        guard let multi = curl_multi_init() else { throw AssetPatchError(.internal, "curl_multi_init failed") }
        defer { curl_multi_cleanup(multi) }
        curl_multi_add_handle(multi, easy)
        defer { curl_multi_remove_handle(multi, easy) }

        var result = CURLE_OK
        var done = false
        ctx.lastActivity = monotonicMillis()
        while !done {
            var running: Int32 = 0
            let mrc = curl_multi_perform(multi, &running)
            if mrc != CURLM_OK { throw AssetPatchError(.internal, "\(what): curl_multi_perform: \(String(cString: curl_multi_strerror(mrc)))") }
            var queued: Int32 = 0
            while let msg = curl_multi_info_read(multi, &queued) {
                if msg.pointee.msg == CURLMSG_DONE {
                    result = msg.pointee.data.result
                    done = true
                }
            }
            if done || running == 0 { done = true; break }
            if let progress { progress(ctx.bodyBytes) }
            if cancel.isCancelled { throw AssetPatchError(.cancelled, "\(what): cancelled") }
            if settings.stallTimeoutMs > 0, monotonicMillis() - ctx.lastActivity > UInt64(settings.stallTimeoutMs) {
                throw AssetPatchError(.network, "\(what): stalled, no data for \(settings.stallTimeoutMs) ms (after \(ctx.bodyBytes) body bytes)",
                                      transient: true)
            }
            var fds: Int32 = 0
            curl_multi_poll(multi, nil, 0, 50, &fds)
        }
        if let progress { progress(ctx.bodyBytes) }
        // A callback's own error (a refused response, a full disk) says more than curl's
        // "failed writing received data".
        if let error = ctx.error { throw error }
        if result != CURLE_OK {
            let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(result))
            throw AssetPatchError(.network, "\(what): \(detail)", transient: HTTPClient.isTransient(result))
        }
        // An empty body never reached the write callback: let onHead judge the response now.
        if !ctx.begin(), let error = ctx.error { throw error }
        var code = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        ctx.head.status = code
        var effective: UnsafeMutablePointer<CChar>?
        _ = ccurl_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective)
        ctx.head.effectiveURL = effective.map { String(cString: $0) } ?? url
        return ctx.head
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
        var body: [UInt8] = []
        let what = "GET \(URLs.redacted(url))"
        let head = try get(url, codings: .decoded, onHead: { head in
            guard head.status == 200 else { throw HTTPClient.statusError(head, what) }
        }, sink: { chunk in
            if body.count + chunk.count > limit {
                throw AssetPatchError(limitStatus, "\(what): response larger than the limit of \(limit) bytes")
            }
            body.append(contentsOf: chunk)
        })
        return (body, head.effectiveURL)
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
            }
        }
    }
}
