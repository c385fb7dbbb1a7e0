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

/// Where a host transport reports one response: its head, then its body. Used on the thread
/// that performs the request only.
package final class HostResponse: @unchecked Sendable {  // one request's thread touches it
    let onHead: (Int, [(String, String)], String?) -> Bool
    let onBody: (UnsafeRawBufferPointer) -> Bool

    init(onHead: @escaping (Int, [(String, String)], String?) -> Bool, onBody: @escaping (UnsafeRawBufferPointer) -> Bool) {
        self.onHead = onHead
        self.onBody = onBody
    }

    /// The final response's status and header lines ("Name: value"), and the URL that
    /// answered after the redirects the host followed (nil: the one asked for). false: refused.
    package func head(status: Int, lines: [String], finalURL: String?) -> Bool {
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]).trimmingCharacters(in: " \t"), String(line[line.index(after: colon)...]).trimmingCharacters(in: " \t"))
        }
        return onHead(status, headers, finalURL)
    }

    /// Body bytes, in order; false: stop (cancelled, refused, a write failed).
    package func body(_ bytes: UnsafeRawBufferPointer) -> Bool { onBody(bytes) }
}

extension HTTPClient {
    /// One request over the host's transport: the configured headers plus `extraHeaders`,
    /// identity coding only (a coded body is refused: the library decodes nothing the host's
    /// stack might have left coded), each body piece held to the cap and to pauses before it
    /// reaches `sink`. A failure the host reports is transient, like libcurl's.
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
        var lines = settings.headers + extraHeaders
        if !lines.contains(where: { $0.lowercased().hasPrefix("accept-encoding:") }) { lines.append("Accept-Encoding: identity") }
        lines.append("User-Agent: \(settings.userAgent)")
        var head = ResponseHead()
        var failure: (any Error)?
        var started = false
        var lastTick = monotonicMillis()
        let control = settings.control, background = settings.background, cancel = self.cancel
        let response = HostResponse(onHead: { status, headers, finalURL in
            guard !started, failure == nil else { return false }
            head = ResponseHead(status: status, headers: headers, effectiveURL: finalURL ?? url)
            if let coding = head.header("Content-Encoding"), coding.lowercased() != "identity" {
                failure = AssetPatchError(.http, "\(what): the host transport returned a body with Content-Encoding \(coding); it must return bytes as sent (identity)")
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
        })
        let rc = transport.perform(method, url, lines, response)
        if let failure { throw failure }
        if cancel.isCancelled { throw AssetPatchError(.cancelled, "\(what): cancelled") }
        if rc != 0 { throw AssetPatchError(.network, "\(what): the host transport failed (\(rc))", transient: true) }
        guard started else { throw AssetPatchError(.network, "\(what): the host transport reported no response", transient: true) }
        try onEnd()
        progress()
        return head
    }
}
