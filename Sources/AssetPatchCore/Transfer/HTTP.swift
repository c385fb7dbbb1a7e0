import Glibc
internal import CCurl

/// Connection settings shared by every request of one update.
package struct HTTPSettings: Sendable {
    package var connectTimeoutMs: Int = 10_000
    package var stallTimeoutMs: Int = 30_000
    /// A transfer that receives fewer than `lowSpeedLimit` bytes per second, averaged over
    /// each `lowSpeedTimeMs`, is aborted (transient, so retried): a body trickling just fast
    /// enough to beat the stall timeout must not hold an update, and its lock, forever.
    package var lowSpeedLimit = 1024
    package var lowSpeedTimeMs = 60_000
    package var caFile: String?
    package var headers: [String] = []
    package var userAgent: String = "assetpatch/\(AssetPatchVersion.string)"
    /// TCP_QUICKACK on every connection and after every response head (see `tcp_quickack`).
    package var quickAck = true
    /// Redirects are followed (up to 5, http and https only); off: a 3xx is the answer.
    package var followRedirects = true
    /// The client's cap, pause and foreground work (nil: none of them).
    package var control: TransferControl?
    /// Background work: holds while foreground work runs on the data directory.
    package var background = false
    /// The host's own transport (nil: libcurl).
    package var transport: HostTransport?
    /// The origin `headers` go to (nil: every request's). With mirrors, the primary's: headers
    /// may carry its credentials, and a mirror, or a URL a mirror's head names, is another host.
    package var headersOrigin: String?

    package init() {}

    /// The configured headers a request to `url` carries.
    func headers(for url: String) -> [String] {
        guard let headersOrigin, URLs.origin(url) != headersOrigin else { return headers }
        return []
    }
}

/// HTTP(S) on libcurl's multi interface. Every transfer runs in a loop that wakes at least
/// every 50 ms, so cancellation and the stall timeout act promptly even when no byte moves.
///
/// Failures carry `transient` for what a retry may fix (see `AssetPatchError`): libcurl's
/// connection, timeout and transfer errors and 5xx answers are transient; a redirect loop, a
/// redirect to another scheme, TLS verification and other 4xx answers are not. A 429 is
/// transient when it says when to retry (Retry-After).
package final class HTTPClient {
    let settings: HTTPSettings
    let cancel: CancelToken

    package init(settings: HTTPSettings, cancel: CancelToken) {
        self.settings = settings
        self.cancel = cancel
    }

    /// Performs one GET. `extraHeaders` are added to the configured ones. `onHead` sees the
    /// final response head before any body byte and may throw to refuse the body; `sink`
    /// receives the body. `progress` is called from the loop (not from libcurl) with the body
    /// bytes so far. `receiveBuffer`: libcurl's receive buffer in bytes (0: its default, 16 KiB);
    /// a large body in large pieces costs fewer system calls and callbacks.
    package func get(_ url: String, extraHeaders: [String] = [], codings: ContentCodings = .identity,
                    receiveBuffer: Int = 0,
                    onHead: @escaping (ResponseHead) throws -> Void,
                    sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
                    progress: ((UInt64) -> Void)? = nil) throws -> ResponseHead {
        try perform("GET", url, extraHeaders: extraHeaders, codings: codings, receiveBuffer: receiveBuffer, onHead: onHead, sink: sink,
                    progress: progress)
    }

    /// Performs one HEAD and returns the final response head, whatever its status.
    package func head(_ url: String, extraHeaders: [String] = []) throws -> ResponseHead {
        try perform("HEAD", url, extraHeaders: extraHeaders, codings: .identity, receiveBuffer: 0, onHead: { _ in }, sink: { _ in },
                    progress: nil)
    }

    private func perform(_ method: String, _ url: String, extraHeaders: [String], codings: ContentCodings, receiveBuffer: Int,
                         onHead: @escaping (ResponseHead) throws -> Void,
                         sink: @escaping (UnsafeRawBufferPointer) throws -> Void,
                         progress: ((UInt64) -> Void)?) throws -> ResponseHead {
        if let transport = settings.transport {
            var body: UInt64 = 0
            return try viaHost(transport, method, url, extraHeaders: extraHeaders, onHead: onHead, sink: { chunk in
                try sink(chunk)
                body += UInt64(chunk.count)
            }, onEnd: {}, progress: { progress?(body) })
        }
        let t = try Transfer(method, url, settings: settings, extraHeaders: extraHeaders, codings: codings, receiveBuffer: receiveBuffer,
                             onHead: onHead, sink: sink)
        var given = false
        try run(parallel: 1, progress: { if let progress { progress(t.ctx.bodyBytes) } }) {
            defer { given = true }
            return given ? nil : Pending(make: { t }, continuation: nil)
        }
        return t.ctx.head
    }

    /// One request of a batch: the headers to add, and what to do with the response.
    package struct Request {
        package var extraHeaders: [String]
        /// Sees the final response head before any body byte; throws to refuse the body.
        package var onHead: (ResponseHead) throws -> Void
        package var sink: (UnsafeRawBufferPointer) throws -> Void
        /// Called when the response ended without an error.
        package var onEnd: () throws -> Void
        /// The same request for the rest of its body once `n` bytes of it went to `sink` (a
        /// Range from the byte it reached, feeding the same sink), or nil when those were all
        /// of it (it then ends). A transfer held longer than `TransferControl.releaseAfterMs`
        /// (a pause, a yield to foreground work) is taken apart, its connection closed, and
        /// goes on by it. Without one, a request nothing of which arrived is asked for again
        /// whole; one that had bytes fails the batch as released (the caller's retry waits for
        /// the resume and starts it over).
        package var continuation: ((UInt64) -> Request?)?

        package init(extraHeaders: [String], onHead: @escaping (ResponseHead) throws -> Void,
                    sink: @escaping (UnsafeRawBufferPointer) throws -> Void, onEnd: @escaping () throws -> Void,
                    continuation: ((UInt64) -> Request?)? = nil) {
            self.extraHeaders = extraHeaders
            self.onHead = onHead
            self.sink = sink
            self.onEnd = onEnd
            self.continuation = continuation
        }
    }

    /// A transfer to start, and how to go on with it once some of its body arrived.
    struct Pending {
        let make: () throws -> Transfer
        let continuation: ((UInt64) -> Pending?)?
        /// Work spread over several sources (`SourceSpread`): what to do when this transfer
        /// failed, and a twin on another source when it sent nothing for the hedge's time.
        var sourced: Sourced?

        init(make: @escaping () throws -> Transfer, continuation: ((UInt64) -> Pending?)?, sourced: Sourced? = nil) {
            self.make = make
            self.continuation = continuation
            self.sourced = sourced
        }
    }

    /// What a transfer of work spread over several sources adds to a plain one.
    struct Sourced {
        /// The transfer failed with `error` after `bodyBytes` of its body reached its sink;
        /// `covered`: a twin still runs the same work. What to start in its place (nil: the
        /// work is covered, or abandoned); throws to fail the batch.
        var recover: (_ error: any Error, _ bodyBytes: UInt64, _ covered: Bool) throws -> Pending?
        /// The same work on the next source, started when this transfer received nothing for
        /// `hedgeMs` (nil: no other source).
        var hedge: (() -> Pending?)?
        var hedgeMs: UInt64
        /// Shared by a transfer and its twins: the first whose head is taken wins.
        var race: Race
        /// Called once when the transfer leaves the loop, however it ended.
        var left: () -> Void
        /// Called when the transfer leaves because a twin's answer came first.
        var lost: (() -> Void)? = nil
        /// true: the transfer leaves now, its work abandoned (checked at every wake).
        var expired: (() -> Bool)? = nil
    }

    /// The transfers running the same work on different sources: the first whose response
    /// head is accepted takes the work; the others are removed from the loop.
    final class Race {
        var winner: ObjectIdentifier?
        /// Transfers of this work still in the loop.
        var running = 0
        init() {}
    }

    /// Performs GETs of `url`, up to `parallel` at once over reused connections (one libcurl
    /// multi handle: its connection cache keeps connections open between requests). The first
    /// failure stops the batch and is thrown; requests that ended before it have had `onEnd`.
    /// `progress` is called from the loop, at least every 50 ms.
    package func getBatch(_ url: String, _ requests: [Request], parallel: Int, progress: () -> Void) throws {
        if let transport = settings.transport {
            // One at a time: the host's stack has its own connections and their limits.
            for r in requests {
                _ = try viaHost(transport, "GET", url, extraHeaders: r.extraHeaders, onHead: r.onHead, sink: r.sink, onEnd: r.onEnd,
                                progress: progress)
            }
            return
        }
        let settings = settings
        func pending(_ r: Request) -> Pending {
            Pending(make: {
                try Transfer("GET", url, settings: settings, extraHeaders: r.extraHeaders, codings: .identity,
                             onHead: r.onHead, sink: r.sink, onEnd: r.onEnd)
            }, continuation: r.continuation.map { next in { next($0).map(pending) } })
        }
        var next = 0
        try run(parallel: parallel, progress: progress) {
            guard next < requests.count else { return nil }
            defer { next += 1 }
            return pending(requests[next])
        }
    }

    /// Performs transfers `next` hands out (each of its own URL), up to `capacity()` at once:
    /// work spread over several sources, whose transfers carry `Sourced`. nil from `next`: no
    /// more work, but what `recover` hands back.
    func runSourced(capacity: @escaping () -> Int, progress: () -> Void, next: @escaping () throws -> Pending?) throws {
        try run(parallel: 16, capacity: capacity, progress: progress, next: next)
    }

    /// The multi loop: keeps up to `parallel` transfers from `next` running, wakes at least every
    /// 50 ms for cancellation, stall detection and `progress`, and sooner for transfers the
    /// cap held. Held transfers (paused, yielding, capped) count as active, not as stalled; held
    /// past `TransferControl.releaseAfterMs`, they are taken apart, the connections closed with
    /// the multi handle, and after the wait they go on from where they stopped.
    private func run(parallel: Int, capacity: (() -> Int)? = nil, progress: () -> Void, next: () throws -> Pending?) throws {
        let control = settings.control
        let limit = { max(1, capacity?() ?? parallel) }
        var queue: [Pending] = []   // transfers taken apart, to start again first
        var exhausted = false
        // One multi handle's life: true when its transfers were taken apart for a long hold.
        func once() throws -> Bool {
            // Outlives the multi handle: its clean-up closes the connections through it.
            let sockets = UnsafeMutablePointer<ccurl_sockets>.allocate(capacity: 1)
            sockets.initialize(to: ccurl_sockets())
            // Under a cap, connections get a receive buffer of 1/32 s at the cap (16 KiB to
            // 4 MiB; the kernel doubles it): what the server may send ahead of the bucket stays
            // small, so the rate it sends at follows the cap, and four connections still fill
            // the cap up to about 250 ms of round trip.
            if let rate = control?.maxRecvSpeed, rate > 0 {
                sockets.pointee.receive_buffer = Int32(min(max(rate / 32, 16 << 10), 4 << 20))
            }
            defer { sockets.deallocate() }
            guard let multi = curl_multi_init() else { throw AssetPatchError(.internal, "curl_multi_init failed") }
            defer { curl_multi_cleanup(multi) }
            _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, parallel))
            var active: [UnsafeMutableRawPointer: (transfer: Transfer, pending: Pending)] = [:]
            defer { for a in active.values { curl_multi_remove_handle(multi, a.transfer.easy) } }
            var heldSince: UInt64?
            // No transfer starts while transfers hold: it would open a connection to hold.
            func fill() throws {
                if control?.mustHold(background: settings.background) == true { return }
                while active.count < limit() {
                    guard let p = queue.isEmpty ? (exhausted ? nil : try next()) : queue.removeFirst() else { exhausted = true; return }
                    try start(p)
                }
            }
            func start(_ p: Pending) throws {
                let t = try p.make()
                (t.ctx.held, t.ctx.draining) = (false, false)  // a transfer started again after a release
                t.ctx.lastActivity = monotonicMillis()
                t.ctx.windowStart = t.ctx.lastActivity
                t.ctx.startedAt = t.ctx.lastActivity
                t.ctx.race = p.sourced?.race
                p.sourced?.race.running += 1
                _ = ccurl_setopt_track_sockets(t.easy, sockets)
                let rc = curl_multi_add_handle(multi, t.easy)
                if rc != CURLM_OK {
                    p.sourced.map { $0.race.running -= 1; $0.left() }
                    throw AssetPatchError(.internal, "\(t.what): curl_multi_add_handle: \(String(cString: curl_multi_strerror(rc)))")
                }
                active[t.easy] = (t, p)
            }
            try fill()
            var released = false
            while !active.isEmpty || !(exhausted && queue.isEmpty) {
                if active.isEmpty {
                    try fill()  // after a hold that kept them from starting
                    if active.isEmpty && exhausted && queue.isEmpty { break }
                }
                if try perform(multi, &active, &queue) {
                    try fill()
                    progress()
                    continue  // start the next requests at once
                }
                progress()
                if cancel.isCancelled {
                    throw AssetPatchError(.cancelled, "\(active.values.first?.transfer.what ?? "transfer"): cancelled")
                }
                var now = monotonicMillis()
                var wakeMs: UInt64 = 50
                let holdingNow = control?.mustHold(background: settings.background) ?? false
                for (easy, (t, p)) in active {
                    guard let s = p.sourced else { continue }
                    if let expired = s.expired, expired() {
                        curl_multi_remove_handle(multi, easy)
                        active[easy] = nil
                        try leave(t, s, error: nil, &queue)
                        continue
                    }
                    // A transfer whose source sent nothing (not a header byte) for the hedge's
                    // time: its twin starts on the next source, beside it; the first to answer
                    // takes the work. A hold (pause, foreground work) is not the source's
                    // silence: the clock starts again after it.
                    guard !t.ctx.hedged, t.ctx.receivedBytes == 0, let hedge = s.hedge, s.race.winner == nil else { continue }
                    if holdingNow {
                        t.ctx.startedAt = now
                    } else if now - t.ctx.startedAt >= s.hedgeMs {
                        t.ctx.hedged = true
                        if let twin = hedge() { try start(twin) }
                    } else {
                        wakeMs = min(wakeMs, s.hedgeMs - (now - t.ctx.startedAt))
                    }
                }
                // A capacity that grows (another source joined) is filled without waiting for
                // a transfer to end.
                if capacity != nil { try fill() }
                if let control {
                    let holding = control.mustHold(background: settings.background)
                    heldSince = holding ? heldSince ?? now : nil
                    if let since = heldSince, now - since >= TransferControl.releaseAfterMs {
                        try release(&active, into: &queue, multi, sockets)
                        released = true
                        break
                    }
                    if !holding { try fill() }
                    let held = active.values.map(\.transfer).filter { $0.ctx.held }.sorted { $0.ctx.heldTicket < $1.ctx.heldTicket }
                    // A held transfer is not stalled: its clock starts again.
                    for t in held { t.ctx.lastActivity = now }
                    if !holding && control.refillWaitMs() == 0 {
                        // The longest held first, until one is held again (the bucket is empty).
                        for t in held {
                            t.ctx.held = false
                            // Its low-speed window does not count the time it was held.
                            t.ctx.windowStart += monotonicMillis() - t.ctx.heldSince
                            let rc = ccurl_unpause(t.easy)  // the kept piece goes to the write callback now
                            if let error = t.ctx.error {
                                try fail(t.easy, error, multi, &active, &queue)
                                continue
                            }
                            if rc != CURLE_OK {
                                try fail(t.easy, AssetPatchError(.network, "\(t.what): curl_easy_pause: \(String(cString: curl_easy_strerror(rc)))", transient: true),
                                         multi, &active, &queue)
                                continue
                            }
                            if t.ctx.held { break }
                        }
                    }
                    let refill = holding ? 0 : control.refillWaitMs()
                    if refill > 0 { wakeMs = min(wakeMs, refill) }
                }
                // Read again: a transfer let go on above has taken a piece since `now`.
                now = monotonicMillis()
                // A stalled or trickling transfer fails the batch, or, spread over sources, its
                // source (the work goes on from the next).
                if settings.stallTimeoutMs > 0 {
                    for (easy, (t, _)) in active where now - t.ctx.lastActivity > UInt64(settings.stallTimeoutMs) {
                        try fail(easy, AssetPatchError(.network, "\(t.what): stalled, no data for \(settings.stallTimeoutMs) ms (after \(t.ctx.bodyBytes) body bytes)",
                                                       transient: true), multi, &active, &queue)
                    }
                }
                if settings.lowSpeedLimit > 0 {
                    let window = UInt64(settings.lowSpeedTimeMs)
                    for (easy, (t, _)) in active where !t.ctx.held && now - t.ctx.windowStart >= window {
                        let got = t.ctx.receivedBytes - t.ctx.windowBytes
                        if got * 1000 < UInt64(settings.lowSpeedLimit) * window {
                            try fail(easy, AssetPatchError(.network, "\(t.what): slower than low_speed_limit, \(got) bytes in \(window) ms (after \(t.ctx.bodyBytes) body bytes)",
                                                           transient: true), multi, &active, &queue)
                            continue
                        }
                        t.ctx.windowStart = now
                        t.ctx.windowBytes = t.ctx.receivedBytes
                    }
                }
                var fds: Int32 = 0
                curl_multi_poll(multi, nil, 0, Int32(wakeMs), &fds)
            }
            return released
        }
        // The multi handle (its connections with it) is gone before the wait.
        while try once(), let control {
            try control.waitWhileHeld(background: settings.background, cancel: cancel, tick: progress)
            if queue.isEmpty && exhausted { return }
        }
    }

    /// One round of libcurl's work; transfers that ended are concluded and leave `active`.
    /// true when one did.
    private func perform(_ multi: UnsafeMutableRawPointer, _ active: inout [UnsafeMutableRawPointer: (transfer: Transfer, pending: Pending)],
                         _ queue: inout [Pending]) throws -> Bool {
        var running: Int32 = 0
        let mrc = curl_multi_perform(multi, &running)
        if mrc != CURLM_OK { throw AssetPatchError(.internal, "curl_multi_perform: \(String(cString: curl_multi_strerror(mrc)))") }
        var queued: Int32 = 0
        var ended = false
        while let msg = curl_multi_info_read(multi, &queued) {
            guard msg.pointee.msg == CURLMSG_DONE, let easy = msg.pointee.easy_handle, let (t, p) = active[easy] else { continue }
            let result = msg.pointee.data.result
            curl_multi_remove_handle(multi, easy)
            active[easy] = nil
            ended = true
            guard let s = p.sourced else {
                try t.conclude(result)
                continue
            }
            var failure: (any Error)?
            do { try t.conclude(result) } catch { failure = error }
            try leave(t, s, error: failure, &queue)
        }
        // Twins that lost their race leave at once: their source's answer came second.
        for (easy, (t, p)) in active {
            guard let s = p.sourced, let w = s.race.winner, w != ObjectIdentifier(t.ctx) else { continue }
            curl_multi_remove_handle(multi, easy)
            active[easy] = nil
            s.lost?()
            try leave(t, s, error: nil, &queue)
            ended = true
        }
        return ended
    }

    /// A sourced transfer that left the loop (removed already): its race's count, its
    /// recovery when it failed (nothing to recover after a lost race, or while a twin still
    /// covers the work), then `left`.
    private func leave(_ t: Transfer, _ s: Sourced, error: (any Error)?, _ queue: inout [Pending]) throws {
        s.race.running -= 1
        defer { s.left() }
        guard let error, !(error is LostRace) else { return }
        // Covered: a twin still runs it, or another transfer's answer took it.
        let me = ObjectIdentifier(t.ctx)
        let covered = (s.race.winner == nil && s.race.running > 0) || (s.race.winner != nil && s.race.winner != me)
        if let again = try s.recover(error, t.ctx.bodyBytes, covered) { queue.append(again) }
    }

    /// A transfer that failed while running (a stall, a callback's error on being let go on):
    /// a plain one fails the batch; a sourced one leaves, its work going to its recovery.
    private func fail(_ easy: UnsafeMutableRawPointer, _ error: any Error, _ multi: UnsafeMutableRawPointer,
                      _ active: inout [UnsafeMutableRawPointer: (transfer: Transfer, pending: Pending)], _ queue: inout [Pending]) throws {
        guard let (t, p) = active[easy] else { return }
        guard let s = p.sourced else { throw error is LostRace ? AssetPatchError(.internal, "\(t.what): lost a race it was not in") : error }
        curl_multi_remove_handle(multi, easy)
        active[easy] = nil
        try leave(t, s, error: error, &queue)
    }

    /// Takes every active transfer apart for a long hold: each goes back to `queue` as its
    /// continuation from the bytes its sink took, or whole when none arrived; a transfer that
    /// can't go on fails the batch as released. What already arrived on each connection is
    /// taken first (the next bytes of each range; a transfer that ends meanwhile ends), with
    /// its receive buffer shrunk so that the server has little room to send more: closing
    /// loses at most a few KiB per connection of what it sent.
    private func release(_ active: inout [UnsafeMutableRawPointer: (transfer: Transfer, pending: Pending)], into queue: inout [Pending],
                         _ multi: UnsafeMutableRawPointer, _ sockets: UnsafeMutablePointer<ccurl_sockets>) throws {
        ccurl_sockets_shrink(sockets)
        for (easy, (t, _)) in active {
            t.ctx.draining = true
            if t.ctx.held {
                t.ctx.held = false
                _ = ccurl_unpause(t.easy)
            }
            if let error = t.ctx.error { try fail(easy, error, multi, &active, &queue) }
        }
        for round in 0..<256 {
            // Once at least: a transfer whose kept piece was its last ends here.
            guard !active.isEmpty, round == 0 || ccurl_sockets_pending(sockets) > 0 else { break }
            _ = try perform(multi, &active, &queue)
        }
        var again: [Pending] = []
        for (easy, (t, p)) in active {
            curl_multi_remove_handle(multi, easy)
            active[easy] = nil
            if let s = p.sourced {
                // Taken apart by the hold: it recovers from its error, or goes on by its
                // continuation below, as a plain transfer would.
                if let error = t.ctx.error {
                    try leave(t, s, error: error, &queue)
                    continue
                }
                s.race.running -= 1
                s.left()
            }
            if let error = t.ctx.error { throw error }
            if !t.ctx.started && t.ctx.bodyBytes == 0 {
                again.append(p)
            } else if let go = p.continuation {
                // nil: every byte asked for arrived (the response's end not yet read): it ends.
                if let next = go(t.ctx.bodyBytes) { again.append(next) } else { try t.conclude(CURLE_OK) }
            } else {
                throw AssetPatchError(.network, "\(t.what): released while held (after \(t.ctx.bodyBytes) body bytes)", transient: true, released: true)
            }
        }
        queue = again + queue
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
    package func fetch(_ url: String, limit: Int, limitStatus: Status) throws -> (body: [UInt8], finalURL: String) {
        let r = try fetch(url, limit: limit, limitStatus: limitStatus, conditions: [])
        return (r.body ?? [], r.head.effectiveURL)
    }

    /// A small body fetched conditionally: `body` is nil when the server answered 304 Not
    /// Modified to the `conditions` (If-None-Match or If-Modified-Since headers). `head` is the
    /// final response's, its `effectiveURL` the URL after redirects.
    func fetch(_ url: String, limit: Int, limitStatus: Status, conditions: [String]) throws -> (body: [UInt8]?, head: ResponseHead) {
        var body: [UInt8] = []
        let what = "GET \(URLs.redacted(url))"
        let conditional = !conditions.isEmpty
        let head = try get(url, extraHeaders: conditions, codings: .decoded, onHead: { head in
            guard head.status == 200 || (conditional && head.status == 304) else { throw HTTPClient.statusError(head, what) }
            // The announced length sizes the buffer once, instead of its doubling up to it.
            if let length = head.contentLength, length <= UInt64(limit) { body.reserveCapacity(Int(length)) }
        }, sink: { chunk in
            if body.count + chunk.count > limit {
                throw AssetPatchError(limitStatus, "\(what): response larger than the limit of \(limit) bytes")
            }
            body.append(contentsOf: chunk)
        })
        return (head.status == 304 ? nil : body, head)
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
