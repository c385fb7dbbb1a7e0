import Glibc
internal import CCurl

/// libcurl's global initialisation (`curl_global_init`), once per process and never undone:
/// libcurl counts its initialisations, so a host that uses libcurl too keeps its own. Done at the
/// first client open, on the host's thread (libcurl before 7.84 asks for it before other threads
/// run), and checked before every transfer: a failure (out of memory, the TLS library) fails the
/// transfer with its reason instead of letting libcurl fail later without one.
enum CurlGlobal {
    private static let result: Int32 = Int32(curl_global_init(Int(CURL_GLOBAL_DEFAULT)).rawValue)

    /// Initialises libcurl if this process has not yet; throws when that failed.
    static func initialize() throws {
        let rc = CURLcode(rawValue: UInt32(result))
        guard rc == CURLE_OK else {
            throw AssetPatchError(.network, "libcurl could not be initialised: curl_global_init: \(String(cString: curl_easy_strerror(rc)))")
        }
    }
}

/// State shared with libcurl's C callbacks for one transfer; reached through an opaque pointer.
final class TransferContext {
    var head = ResponseHead()
    var started = false
    /// Called once with the final response head, before any body byte; throws to refuse it.
    var onHead: (ResponseHead) throws -> Void = { _ in }
    var sink: (UnsafeRawBufferPointer) throws -> Void = { _ in }
    var error: (any Error)?
    var bodyBytes: UInt64 = 0
    /// Head and body bytes received: what the minimum-speed rule counts.
    var receivedBytes: UInt64 = 0
    var lastActivity = monotonicMillis()
    /// The current minimum-speed window: when it began and `receivedBytes` then.
    var windowStart = monotonicMillis()
    var windowBytes: UInt64 = 0
    var easy: UnsafeMutableRawPointer?
    var quickAck = false
    /// The cap, pause and foreground work this transfer obeys, and whether it is held now
    /// (its write callback answered CURL_WRITEFUNC_PAUSE; the loop lets it go on).
    var control: TransferControl?
    var background = false
    var held = false
    /// When it was last held, and its place in the queue of held transfers (the longest held
    /// goes on first: a refilled bucket is not won by the same transfer every time).
    var heldSince: UInt64 = 0
    var heldTicket: UInt64 = 0
    /// Taken apart after a long hold: what already arrived is read first, whatever the hold.
    var draining = false

    /// When the transfer started (hedging), and whether its twin was started.
    var startedAt: UInt64 = 0
    var hedged = false
    /// Work run on several sources at once: the first head accepted takes it.
    var race: HTTPClient.Race?

    func begin() -> Bool {
        if started { return true }
        started = true
        do {
            if let race, race.winner != nil { throw LostRace() }
            try onHead(head)
            race?.winner = ObjectIdentifier(self)
        } catch {
            self.error = error
            return false
        }
        return true
    }
}

/// A transfer whose twin on another source answered first: it leaves without an error.
struct LostRace: Error {}

private let writeCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    guard let user, let ptr else { return 0 }
    let ctx = Unmanaged<TransferContext>.fromOpaque(user).takeUnretainedValue()
    let n = size * count
    // Refused already (a callback failed inside an unpause, whose result libcurl drops):
    // nothing more reaches the sink.
    if ctx.error != nil { return 0 }
    if let control = ctx.control, !ctx.draining, !control.admit(n, background: ctx.background) {
        // libcurl keeps this piece, hands it over again once the loop lets the transfer go
        // on, and reads nothing from its socket meanwhile.
        if !ctx.held {
            ctx.heldSince = monotonicMillis()
            ctx.heldTicket = control.ticket()
        }
        ctx.held = true
        return Int(CURL_WRITEFUNC_PAUSE)
    }
    ctx.lastActivity = monotonicMillis()
    ctx.receivedBytes += UInt64(n)
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
    ctx.receivedBytes += UInt64(n)
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

/// One configured libcurl easy handle and the state its callbacks share.
final class Transfer {
    let easy: UnsafeMutableRawPointer
    let ctx = TransferContext()
    let what: String
    let url: String
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var list: UnsafeMutablePointer<curl_slist>?
    private let onEnd: () throws -> Void

    init(_ method: String, _ url: String, settings: HTTPSettings, extraHeaders: [String], codings: ContentCodings, receiveBuffer: Int = 0,
         onHead: @escaping (ResponseHead) throws -> Void, sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
         onEnd: @escaping () throws -> Void = {}) throws {
        what = "\(method) \(URLs.redacted(url))"
        self.url = url
        self.onEnd = onEnd
        try CurlGlobal.initialize()
        guard let easy = curl_easy_init() else { throw AssetPatchError(.internal, "curl_easy_init failed") }
        self.easy = easy
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        ctx.onHead = onHead
        ctx.sink = sink
        ctx.easy = easy
        ctx.quickAck = settings.quickAck
        ctx.control = settings.control
        ctx.background = settings.background

        var headers = settings.headers(for: url) + extraHeaders
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
        set(ccurl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, settings.followRedirects ? 1 : 0))
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
        // Under a cap, libcurl's default 16 KiB pieces: the bucket is drawn in finer steps.
        if receiveBuffer > 0, settings.control?.maxRecvSpeed ?? 0 == 0 { set(ccurl_setopt_long(easy, CURLOPT_BUFFERSIZE, receiveBuffer)) }
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
