internal import AssetPatchCore

/// One outcome event as the outbox holds it: its sequence number and its JSON (one object; the
/// fields are listed in docs/release-management.md, "Rollout health").
public struct OutcomeEventRecord: Sendable, Equatable {
    public var seq: UInt64
    public var json: String
}

/// The data directory's outbox: events not acknowledged, the oldest and newest of them, the
/// last acknowledged seq, events dropped to keep within `eventsMaxBytes`, its size on disk.
public struct EventsInfo: Sendable, Equatable {
    public var pending: UInt64
    public var firstSeq: UInt64
    public var lastSeq: UInt64
    public var ackedSeq: UInt64
    public var dropped: UInt64
    public var bytes: UInt64
}

/// Outcome events: read a batch, forward it, then acknowledge it.
extension AssetPatchClient {
    /// The oldest events not acknowledged yet, oldest first: at most about `maxBytes` of JSON,
    /// always the oldest one.
    public func events(maxBytes: Int = 65536) throws(AssetPatchError) -> [OutcomeEventRecord] {
        let c = try open()
        return try mapped { try c.readEvents(maxBytes: maxBytes).map { OutcomeEventRecord(seq: $0.seq, json: $0.json) } }
    }

    /// Acknowledges every event up to `seq`: no read returns them again, in any process.
    /// - Throws: ``AssetPatchError`` `.argument` for a seq past the newest event, `.io`.
    public func acknowledgeEvents(through seq: UInt64) throws(AssetPatchError) {
        let c = try open()
        try mapped { try c.acknowledgeEvents(through: seq) }
    }

    public func eventsInfo() throws(AssetPatchError) -> EventsInfo {
        let c = try open()
        let i = try mapped { try c.eventsInfo() }
        return EventsInfo(pending: i.pending, firstSeq: i.firstSeq, lastSeq: i.lastSeq, ackedSeq: i.acked, dropped: i.dropped, bytes: i.bytes)
    }

    /// Calls `handler` with each event's JSON as this client appends it, on the thread that
    /// appended it (nil: none). Events of the open, or of other processes, are read with
    /// ``events(maxBytes:)``.
    public func setEventHandler(_ handler: (@Sendable (String) -> Void)?) {
        guard let c = try? open() else { return }
        c.setEventCallback(handler)
    }
}
