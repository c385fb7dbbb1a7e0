import Glibc

/// A transport the host supplies (`assetpatch_set_transport`): the platform's own HTTP stack
/// (a background URL session, OkHttp, BITS) performs each request and streams the response
/// back. Everything above it is unchanged: ranges, resume, verification, validators, retries,
/// the cap and pauses (applied as the body arrives).
package final class HostTransport: Sendable {
    /// Performs one request (method, URL, header lines, where the response goes) on the calling
    /// thread; 0 when the response ended, non-zero when the transfer failed.
    let perform: @Sendable (String, String, [String], HostResponse) -> Int32

    package init(perform: @escaping @Sendable (String, String, [String], HostResponse) -> Int32) {
        self.perform = perform
    }
}

/// Where a host transport reports one response: its head, then its body. Once the request's
/// perform call has returned it is closed: a late report is refused, never delivered.
package final class HostResponse: @unchecked Sendable {  // `handlers` only under `lock`
    private let lock = Condition()
    private var handlers: (head: (Int, [(String, String)], String?) -> Bool, body: (UnsafeRawBufferPointer) -> Bool, fail: (String) -> Void)?

    init(onHead: @escaping (Int, [(String, String)], String?) -> Bool, onBody: @escaping (UnsafeRawBufferPointer) -> Bool,
         onFail: @escaping (String) -> Void) {
        handlers = (onHead, onBody, onFail)
    }

    /// The transport misused the interface (`why`): the transfer fails, whatever it returns.
    package func fail(_ why: String) { lock.locked { handlers?.fail(why) } }

    /// Ends the response: later reports return false; the handlers (and what they hold) go.
    package func close() { lock.locked { handlers = nil } }

    /// The final response's status and header lines ("Name: value"), and the URL that
    /// answered after the redirects the host followed (nil: the one asked for). false: refused.
    package func head(status: Int, lines: [String], finalURL: String?) -> Bool {
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]).trimmingCharacters(in: " \t"), String(line[line.index(after: colon)...]).trimmingCharacters(in: " \t"))
        }
        return lock.locked { handlers?.head(status, headers, finalURL) ?? false }
    }

    /// Body bytes, in order; false: stop (cancelled, refused, a write failed).
    package func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        lock.locked { handlers?.body(bytes) ?? false }
    }
}

extension HTTPClient {
    /// One request over the host's transport: the configured headers plus `extraHeaders` and
    /// identity coding asked for, each body piece held to the cap and to pauses before it
    /// reaches `sink`. The response is judged as libcurl's would be: `onHead` sees it (a coded
    /// body included: the callers know what to do with one), a body shorter than its
    /// Content-Length or a failure the host reports is transient, and a request that must not
    /// follow redirects (a key document) refuses a response from another URL.
    func viaHost(_ transport: HostTransport, _ method: String, _ url: String, extraHeaders: [String],
                 onHead: @escaping (ResponseHead) throws -> Void, sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
                 onEnd: () throws -> Void, progress: () -> Void) throws -> ResponseHead {
        try withoutActuallyEscaping(progress) { progress in
            try viaHost(transport, method, url, extraHeaders: extraHeaders, onHead: onHead, sink: sink, onEnd: onEnd, ticking: progress)
        }
    }

    private func viaHost(_ transport: HostTransport, _ method: String, _ url: String, extraHeaders: [String],
                         onHead: @escaping (ResponseHead) throws -> Void, sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
                         onEnd: () throws -> Void, ticking progress: @escaping () -> Void) throws -> ResponseHead {
        let what = "\(method) \(URLs.redacted(url))"
        var lines = settings.headers(for: url) + extraHeaders
        let named = { (name: String) in lines.contains { $0.lowercased().hasPrefix(name + ":") } }
        if !named("accept-encoding") { lines.append("Accept-Encoding: identity") }
        if !named("user-agent") { lines.append("User-Agent: \(settings.userAgent)") }
        var head = ResponseHead()
        var failure: (any Error)?
        var started = false
        var received: UInt64 = 0
        var lastTick = monotonicMillis()
        let control = settings.control, background = settings.background, cancel = self.cancel, follows = settings.followRedirects
        let response = HostResponse(onHead: { status, headers, finalURL in
            guard !started, failure == nil else { return false }
            head = ResponseHead(status: status, headers: headers, effectiveURL: finalURL ?? url)
            if !follows && head.effectiveURL != url {
                failure = AssetPatchError(.http, "\(what): the host transport followed a redirect to \(URLs.redacted(head.effectiveURL)), which this request does not allow")
                return false
            }
            guard let scheme = URLs.scheme(head.effectiveURL), scheme != .file else {
                failure = AssetPatchError(.http, "\(what): the host transport answered from \(URLs.redacted(head.effectiveURL)), not an http(s) URL")
                return false
            }
            do { try onHead(head) } catch {
                failure = error
                return false
            }
            started = true
            return true
        }, onBody: { bytes in
            guard started, failure == nil else { return false }
            do {
                if let control {
                    try control.waitWhileHeld(background: background, cancel: cancel, tick: progress)
                    while !control.take(bytes.count) {
                        try cancel.sleep(ms: control.refillWaitMs())
                        try control.waitWhileHeld(background: background, cancel: cancel, tick: progress)
                    }
                }
                try cancel.check()
                try sink(bytes)
                received += UInt64(bytes.count)
            } catch {
                failure = error
                return false
            }
            let now = monotonicMillis()
            if now - lastTick >= ProgressReporter.intervalMs {
                lastTick = now
                progress()
            }
            return true
        }, onFail: { why in
            if failure == nil { failure = AssetPatchError(.network, "\(what): \(why)", transient: true) }
        })
        let rc = transport.perform(method, url, lines, response)
        response.close()
        if let failure { throw failure }
        if cancel.isCancelled { throw AssetPatchError(.cancelled, "\(what): cancelled") }
        if rc != 0 { throw AssetPatchError(.network, "\(what): the host transport failed (\(rc))", transient: true) }
        guard started else { throw AssetPatchError(.network, "\(what): the host transport reported no response", transient: true) }
        if method != "HEAD", head.status != 304, let length = head.contentLength, received < length, head.header("Content-Encoding") == nil {
            throw AssetPatchError(.network, "\(what): the body ended after \(received) of its \(length) bytes", transient: true)
        }
        try onEnd()
        progress()
        return head
    }
}
