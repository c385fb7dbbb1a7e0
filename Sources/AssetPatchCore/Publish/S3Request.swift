import Glibc
internal import CCurl

/// One signed request to a bucket: libcurl signs it (AWS Signature Version 4,
/// `CURLOPT_AWS_SIGV4`) with the payload's sha256, and it is retried on the failures a store
/// asks to be retried.
extension ObjectStore {
    enum Upload {
        case none
        case bytes([UInt8])
        case file(String)
    }

    func url(_ key: String, bucketLevel: Bool = false) -> String {
        let path = bucketLevel ? "" : ObjectStore.encode(location.prefix + key, slash: false)
        if location.pathStyle { return "\(location.endpoint)/\(location.bucket)/\(path)" }
        let scheme = location.endpoint.hasPrefix("https://") ? "https://" : "http://"
        return scheme + location.bucket + "." + location.endpoint.dropFirst(scheme.count) + "/" + path
    }

    /// One signed request, tried up to three times (a second apart, then four) when the
    /// connection fails or the store answers 500, 503 (SlowDown) or 429; then thrown.
    func request(_ method: String, _ key: String, query: String = "", headers: [String] = [], payloadSHA256: String? = nil,
                 upload: Upload = .none, bucketLevel: Bool = false, limit: Int = 1 << 20) throws -> Response {
        var attempt = 0
        while true {
            attempt += 1
            do {
                let r = try once(method, key, query: query, headers: headers, payloadSHA256: payloadSHA256, upload: upload,
                                 bucketLevel: bucketLevel, limit: limit)
                guard [500, 503, 429].contains(r.status), attempt < 3 else { return r }
            } catch let e as AssetPatchError where e.status == .network && attempt < 3 {
            }
            sleep(attempt == 1 ? 1 : 4)
        }
    }

    func once(_ method: String, _ key: String, query: String, headers: [String], payloadSHA256: String?,
              upload: Upload, bucketLevel: Bool, limit: Int) throws -> Response {
        // The command-line tool's one thread: curl_easy_init initialises libcurl on its first call.
        guard let easy = curl_easy_init() else { throw AssetPatchError(.internal, "curl_easy_init failed") }
        defer { curl_easy_cleanup(easy) }
        let ctx = RequestContext(limit: limit)
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        // The payload's hash is signed: the store refuses bytes that differ from it.
        var all = headers + ["x-amz-content-sha256: \(payloadSHA256 ?? Digest.sha256Hex([]))"]
        if let token = credentials.token { all.append("x-amz-security-token: \(token)") }
        if case .none = upload, method == "PUT" || method == "POST" { all.append("Content-Length: 0") }
        for h in all { list = curl_slist_append(list, h) }
        var target = url(key, bucketLevel: bucketLevel)
        if !query.isEmpty { target += "?" + query }
        var file: File?
        var rc = CURLE_OK
        func set(_ r: CURLcode) { if rc == CURLE_OK { rc = r } }
        set(ccurl_setopt_ptr(easy, CURLOPT_URL, target))
        set(ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        set(ccurl_setopt_ptr(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(ccurl_setopt_ptr(easy, CURLOPT_AWS_SIGV4, "aws:amz:\(location.region):s3"))
        set(ccurl_setopt_ptr(easy, CURLOPT_USERNAME, credentials.key))
        set(ccurl_setopt_ptr(easy, CURLOPT_PASSWORD, credentials.secret))
        set(ccurl_setopt_ptr(easy, CURLOPT_HTTPHEADER, list))
        set(ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 30_000))
        set(ccurl_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1))
        set(ccurl_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, 60))
        if let ca = getenv("ASSETPATCH_CA_FILE").map({ String(cString: $0) }), !ca.isEmpty { set(ccurl_setopt_ptr(easy, CURLOPT_CAINFO, ca)) }
        let ctxPointer = Unmanaged.passUnretained(ctx).toOpaque()
        set(ccurl_setopt_write(easy, objectWrite))
        set(ccurl_setopt_ptr(easy, CURLOPT_WRITEDATA, ctxPointer))
        set(ccurl_setopt_header(easy, objectHeader))
        set(ccurl_setopt_ptr(easy, CURLOPT_HEADERDATA, ctxPointer))
        switch upload {
        case .none:
            if method == "HEAD" { set(ccurl_setopt_long(easy, CURLOPT_NOBODY, 1)) } else { set(ccurl_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, method)) }
        case let .bytes(b):
            ctx.upload = b
            set(ccurl_setopt_long(easy, CURLOPT_UPLOAD, 1))
            set(ccurl_setopt_off(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(b.count)))
            set(ccurl_setopt_read(easy, objectRead))
            set(ccurl_setopt_ptr(easy, CURLOPT_READDATA, ctxPointer))
            if method != "PUT" { set(ccurl_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, method)) }
        case let .file(path):
            let f = try File.openRead(path)
            file = f
            ctx.file = f
            set(ccurl_setopt_long(easy, CURLOPT_UPLOAD, 1))
            set(ccurl_setopt_off(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(try f.size())))
            set(ccurl_setopt_read(easy, objectRead))
            set(ccurl_setopt_ptr(easy, CURLOPT_READDATA, ctxPointer))
        }
        guard rc == CURLE_OK else { throw AssetPatchError(.internal, "curl_easy_setopt: \(String(cString: curl_easy_strerror(rc)))") }
        let performed = curl_easy_perform(easy)
        _ = file
        if let e = ctx.failure { throw e }
        guard performed == CURLE_OK else {
            throw AssetPatchError(.network, "\(method) \(location.shown)\(key): \(String(cString: curl_easy_strerror(performed)))")
        }
        var status = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return Response(status: status, headers: ctx.headers, body: ctx.body)
    }

}

/// What one request's callbacks share.
final class RequestContext {
    let limit: Int
    var body: [UInt8] = []
    var headers: [(String, String)] = []
    var upload: [UInt8] = []
    var uploaded = 0
    var file: File?
    var failure: AssetPatchError?

    init(limit: Int) { self.limit = limit }
}

private let objectWrite: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    guard let user, let ptr else { return 0 }
    let ctx = Unmanaged<RequestContext>.fromOpaque(user).takeUnretainedValue()
    let n = size * count
    guard ctx.body.count + n <= ctx.limit else {
        ctx.failure = AssetPatchError(.http, "a response of more than \(ctx.limit) bytes")
        return 0
    }
    ctx.body.append(contentsOf: UnsafeRawBufferPointer(start: ptr, count: n))
    return n
}

private let objectHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    guard let user, let ptr else { return 0 }
    let ctx = Unmanaged<RequestContext>.fromOpaque(user).takeUnretainedValue()
    let n = size * count
    let line = String(decoding: UnsafeRawBufferPointer(start: ptr, count: n), as: UTF8.self).stripping(" \t\r\n")
    if line.hasPrefix("HTTP/") {
        ctx.headers = []
    } else if let colon = line.firstIndex(of: ":"), ctx.headers.count < 200 {
        ctx.headers.append((String(line[..<colon]).lowercased(), String(line[line.index(after: colon)...]).stripping(" \t")))
    }
    return n
}

private let objectRead: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    guard let user, let ptr else { return Int(CURL_READFUNC_ABORT) }
    let ctx = Unmanaged<RequestContext>.fromOpaque(user).takeUnretainedValue()
    let room = size * count
    if let file = ctx.file {
        do { return try file.read(into: UnsafeMutableRawBufferPointer(start: ptr, count: room)) } catch let e as AssetPatchError {
            ctx.failure = e
            return Int(CURL_READFUNC_ABORT)
        } catch { return Int(CURL_READFUNC_ABORT) }
    }
    let n = min(room, ctx.upload.count - ctx.uploaded)
    ctx.upload.withUnsafeBytes { UnsafeMutableRawPointer(ptr).copyMemory(from: $0.baseAddress! + ctx.uploaded, byteCount: n) }
    ctx.uploaded += n
    return n
}
