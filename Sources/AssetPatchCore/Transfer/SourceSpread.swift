/// Range requests of one archive spread over several sources (`Sources`), each range's bytes
/// pushed to its `RangeConsumer` whichever source sends them.
///
/// - **Failover.** A request that fails (connection, status, a range answered wrongly, bytes
///   that fail a check, a stall) demotes its source and goes on from the next one, from the
///   first file or chunk not yet verified (the consumer drops what it had of that one: a
///   failing source's earlier bytes are not known to be good). At most one file or chunk is
///   fetched again per failure, and a demoted source gets no new request in this attempt.
/// - **Hedge.** A request that received nothing for `hedgeMs` gets a twin on the next source;
///   the first whose head is accepted takes the range, the other leaves, and the silent source,
///   when its twin won, is demoted: a black-holed host costs the hedge, not the connect timeout.
/// - **Together.** The first usable source takes every request (a healthy primary: mirrors see
///   none). Once a second has passed, when what is left would take longer than `spreadAfterMs`
///   at the rate so far (and no cap sets that rate), the next source joins, and so on: each free
///   connection takes the next range, so faster sources take more of them.
final class SourceSpread {
    let sources: Sources
    /// The archive on each source (nil: that source has no copy of it, or another source's
    /// location is the same URL).
    private(set) var locations: [Location?]
    let archiveSize: UInt64
    let http: HTTPClient
    let parallel: Int
    let judge: (ResponseHead, FetchRange, String) throws -> Void
    let onBytes: (UInt64) -> Void

    /// What is left would take longer than this at the rate so far: another source joins.
    static let spreadAfterMs: UInt64 = 8_000
    /// The rate is measured for this long before another source may join.
    static let measureMs: UInt64 = 1_000

    private var inUse: [Int] = []
    private var running: [Int: Int] = [:]
    private var startedAt: UInt64 = 0
    private var total: UInt64 = 0
    private var delivered: UInt64 = 0
    private var lastWiden: UInt64 = 0
    /// Consumers made for the rest of a range after bad bytes: abandoned with the others.
    private(set) var made: [any RangeConsumer] = []

    init(sources: Sources, locations: [Location?], archiveSize: UInt64, http: HTTPClient, parallel: Int,
         judge: @escaping (ResponseHead, FetchRange, String) throws -> Void, onBytes: @escaping (UInt64) -> Void) {
        self.sources = sources
        self.locations = locations
        self.archiveSize = archiveSize
        self.http = http
        self.parallel = parallel
        self.judge = judge
        self.onBytes = onBytes
    }

    /// Sources that serve this archive and take work, in order.
    private func usable() -> [Int] { sources.usable().filter { locations[$0] != nil } }

    func run(_ consumers: [any RangeConsumer], progress: () -> Void) throws {
        sources.revive()
        // One source per URL (an absolute location is the same on every source): the first
        // usable one.
        let order = sources.usable()
        var seen = Set<String>()
        for i in order + locations.indices.filter({ !order.contains($0) }) {
            if let l = locations[i], !seen.insert(l.url).inserted { locations[i] = nil }
        }
        total = consumers.reduce(0) { $0 + $1.range.count }
        startedAt = monotonicMillis()
        lastWiden = startedAt
        guard let first = usable().first else { throw AssetPatchError(.network, "no source serves \(locations.compactMap { $0 }.first?.shown ?? "the archive")") }
        inUse = [first]
        var next = consumers[...]
        try http.runSourced(capacity: { [self] in widen(); return parallel * max(1, inUse.count) }, progress: progress) { [self] in
            guard let c = next.popFirst() else { return nil }
            return pending(c, from: c.range.start, on: try pick(), race: HTTPClient.Race(), tried: [])
        }
    }

    /// The source in use with the fewest running requests (the first on a tie).
    private func pick() throws -> Int {
        inUse.removeAll { !sources.isUsable($0) }
        if inUse.isEmpty {
            // Transient: the retry starts the attempt over, every source revived.
            guard let i = usable().first else { throw AssetPatchError(.network, "every source of the archive failed", transient: true) }
            inUse = [i]
        }
        return inUse.min { running[$0, default: 0] < running[$1, default: 0] }!
    }

    /// Another source joins when what is left would take longer than `spreadAfterMs` at the rate
    /// so far; at most one per measuring period.
    private func widen() {
        let now = monotonicMillis()
        guard now - lastWiden >= SourceSpread.measureMs, delivered < total else { return }
        lastWiden = now
        let elapsed = max(1, now - startedAt)
        let rate = delivered * 1000 / elapsed  // bytes per second
        if let cap = http.settings.control?.maxRecvSpeed, cap > 0, rate * 10 >= cap * 9 { return }  // the cap sets the pace
        let left = total - delivered
        guard rate == 0 || left * 1000 / rate > SourceSpread.spreadAfterMs else { return }
        guard let joining = usable().first(where: { !inUse.contains($0) }) else { return }
        inUse.append(joining)
        sources.log(.info, "\(left) bytes left at \(rate) bytes/s: source \(sources.label(joining)) joins")
    }

    /// The next source for work that `tried` failed or hedged on; nil: none left.
    private func after(_ tried: Set<Int>) -> Int? {
        usable().first { !tried.contains($0) }
    }

    private func pending(_ r: any RangeConsumer, from start: UInt64, on i: Int, race: HTTPClient.Race, tried: Set<Int>) -> HTTPClient.Pending {
        let location = locations[i]!
        let shown = location.shown
        let rest = FetchRange(start: start, end: r.range.end, entries: [])
        let tried = tried.union([i])
        let settings = http.settings
        var got: UInt64 = 0
        var hedged = false
        let sourced = HTTPClient.Sourced(
            recover: { [self] error, _, covered in
                // Failures here, not the source's (the disk, cancellation): the batch fails.
                if let e = error as? AssetPatchError, [.cancelled, .io, .internal].contains(e.status) || e.released { throw e }
                sources.demote(i, SourceSpread.describe(error))
                if covered { return nil }
                // The rest from the next source, from the first file or chunk not verified yet:
                // what the consumer had of that one is dropped, since a failing source's bytes
                // before its failure are not known to be good (at most one file or chunk is
                // fetched again).
                r.abandon()
                guard let consumer = r.rest() else { return nil }
                made.append(consumer)
                // Every source tried for this work: the batch fails, and the caller's retries
                // (with their backoff) start again from the first usable source.
                guard let j = after(tried) else { throw error }
                return pending(consumer, from: consumer.range.start, on: j, race: HTTPClient.Race(), tried: tried)
            },
            hedge: sources.hedgeMs == 0 ? nil : { [self] in
                guard let j = after(tried) else { return nil }
                hedged = true
                return pending(r, from: start, on: j, race: race, tried: tried)
            },
            hedgeMs: sources.hedgeMs, race: race,
            left: { [self] in running[i, default: 1] -= 1 },
            lost: { [self] in if hedged { sources.demote(i, "sent nothing for \(sources.hedgeMs) ms while another source answered") } })
        return HTTPClient.Pending(make: { [self] in
            guard case let .http(url) = location else { throw AssetPatchError(.internal, "\(shown): not an http(s) source") }
            let t = try Transfer("GET", url, settings: settings, extraHeaders: ["Range: bytes=\(start)-\(r.range.end - 1)"], codings: .identity,
                                onHead: { head in try self.judge(head, rest, shown) },
                                sink: { chunk in
                                    try r.push(chunk)
                                    got += UInt64(chunk.count)
                                    self.delivered += UInt64(chunk.count)
                                    self.onBytes(UInt64(chunk.count))
                                },
                                onEnd: {
                                    try r.finish()
                                    self.sources.delivered(i, bytes: got, "served \(got) bytes")
                                })
            running[i, default: 0] += 1
            sources.started(i)
            return t
        }, continuation: { [self] n in
            // A long hold took it apart: the same source goes on from where it stopped (a
            // transfer it had begun, so also when another range demoted it meanwhile).
            guard start + n < r.range.end else { return nil }
            return pending(r, from: start + n, on: i, race: HTTPClient.Race(), tried: tried)
        }, sourced: sourced)
    }

    /// A failure as a source's last result.
    static func describe(_ error: any Error) -> String {
        if let e = error as? AssetPatchError { return e.message }
        if let f = error as? DifferentialFallback { return f.message }
        return "\(error)"
    }
}
