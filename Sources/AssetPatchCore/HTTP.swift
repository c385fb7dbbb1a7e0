import Glibc
internal import CCurl

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
    /// bytes so far and the announced length (0 if unknown).
    public func get(_ url: String, extraHeaders: [String] = [],
                    onHead: @escaping (ResponseHead) throws -> Void,
                    sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
                    progress: ((UInt64) -> Void)? = nil) throws -> ResponseHead {
        let shown = URLs.redacted(url)
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
        for h in settings.headers + extraHeaders {
            guard let appended = curl_slist_append(list, h) else { throw AssetPatchError(.internal, "curl_slist_append failed") }
            list = appended
        }

        var rc = CURLE_OK
        func set(_ r: CURLcode) { if rc == CURLE_OK { rc = r } }
        set(assetpatch_curl_setopt_ptr(easy, CURLOPT_URL, url))
        set(assetpatch_curl_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        set(assetpatch_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        // Only http(s), also after redirects: a redirect to file:// must not read local files.
        set(assetpatch_curl_setopt_ptr(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(assetpatch_curl_setopt_ptr(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"))
        set(assetpatch_curl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1))
        set(assetpatch_curl_setopt_long(easy, CURLOPT_MAXREDIRS, 5))
        set(assetpatch_curl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1))
        set(assetpatch_curl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2))
        if let ca = settings.caFile { set(assetpatch_curl_setopt_ptr(easy, CURLOPT_CAINFO, ca)) }
        set(assetpatch_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, settings.connectTimeoutMs))
        set(assetpatch_curl_setopt_ptr(easy, CURLOPT_USERAGENT, settings.userAgent))
        if let list { set(assetpatch_curl_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)) }
        set(assetpatch_curl_setopt_write(easy, writeCallback))
        set(assetpatch_curl_setopt_ptr(easy, CURLOPT_WRITEDATA, ctxPointer))
        set(assetpatch_curl_setopt_header(easy, headerCallback))
        set(assetpatch_curl_setopt_ptr(easy, CURLOPT_HEADERDATA, ctxPointer))
        guard rc == CURLE_OK else {
            throw AssetPatchError(.internal, "GET \(shown): curl option rejected: \(String(cString: curl_easy_strerror(rc)))")
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
            if mrc != CURLM_OK { throw AssetPatchError(.internal, "GET \(shown): curl_multi_perform: \(String(cString: curl_multi_strerror(mrc)))") }
            var queued: Int32 = 0
            while let msg = curl_multi_info_read(multi, &queued) {
                if msg.pointee.msg == CURLMSG_DONE {
                    result = msg.pointee.data.result
                    done = true
                }
            }
            if done || running == 0 { done = true; break }
            if let progress { progress(ctx.bodyBytes) }
            if cancel.isCancelled { throw AssetPatchError(.cancelled, "GET \(shown): cancelled") }
            if settings.stallTimeoutMs > 0, monotonicMillis() - ctx.lastActivity > UInt64(settings.stallTimeoutMs) {
                throw AssetPatchError(.network, "GET \(shown): stalled, no data for \(settings.stallTimeoutMs) ms (after \(ctx.bodyBytes) body bytes)")
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
            throw AssetPatchError(.network, "GET \(shown): \(detail)")
        }
        // An empty body never reached the write callback: let onHead judge the response now.
        if !ctx.begin(), let error = ctx.error { throw error }
        var code = 0
        _ = assetpatch_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        ctx.head.status = code
        var effective: UnsafeMutablePointer<CChar>?
        _ = assetpatch_curl_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective)
        ctx.head.effectiveURL = effective.map { String(cString: $0) } ?? url
        return ctx.head
    }

    /// The final URL after redirects is needed to resolve relative archive URLs; curl reports it.
    public func fetch(_ url: String, limit: Int, limitStatus: Status) throws -> (body: [UInt8], finalURL: String) {
        var body: [UInt8] = []
        let shown = URLs.redacted(url)
        let head = try get(url, onHead: { head in
            guard head.status == 200 else { throw AssetPatchError(.http, "GET \(shown): HTTP \(head.status)", transient: head.status >= 500) }
        }, sink: { chunk in
            if body.count + chunk.count > limit {
                throw AssetPatchError(limitStatus, "GET \(shown): response larger than the limit of \(limit) bytes")
            }
            body.append(contentsOf: chunk)
        })
        return (body, head.effectiveURL)
    }
}
