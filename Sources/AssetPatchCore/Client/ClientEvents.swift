import Glibc

/// Outcome events (`OutcomeEvent`): what this client appends to the data directory's outbox
/// (`EventOutbox`), and the host's side of the outbox (read, acknowledge, live callback).
///
/// Appending never fails the host's call: an outbox that can't be written is logged once per
/// call at warning level and the event is lost (counted nowhere: the disk is the problem).
extension Client {
    /// What events carry that the options set, kept in `events/context` so that the events of
    /// the next open (launches, crash-loop rollbacks: before any option is set) carry them too.
    struct EventContext: Equatable {
        var enabled = true
        var maxBytes = EventOutbox.defaultMaxBytes
        var appVersion: String?

        static func load(_ store: Store) -> EventContext {
            var c = EventContext()
            guard let bytes = try? FS.readFile(path(store), limit: 4096, followLinks: false),
                  let json = try? JSONParser.parse(bytes) else { return c }
            if case let .bool(on)? = json["enabled"] { c.enabled = on }
            if let n = json["max_bytes"]?.int64, n > 0, n <= Int64(Int32.max) { c.maxBytes = Int(n) }
            c.appVersion = json["app_version"]?.string
            return c
        }

        func save(_ store: Store) throws {
            let json = JSON.object([("enabled", .bool(enabled)), ("max_bytes", .int(Int64(maxBytes))),
                                    ("app_version", appVersion.map { .string($0) } ?? .null)])
            try FS.makeDirectories(store.root + "/events", mode: 0o700)
            try FS.writeAtomically(EventContext.path(store), Array((json.serialized() + "\n").utf8), mode: 0o600)
        }

        static func path(_ store: Store) -> String { store.root + "/events/context" }
    }

    /// Keeps what option `option` says about events for later opens (written only when it
    /// changed; the other fields stay as an earlier session set them).
    func keepEventContext(_ option: String) {
        let c = configuration
        // Saved under the lock: two threads setting options at once never save the older one last.
        let failure: String? = eventContext.withLock { kept in
            var next = kept
            switch option {
            case "events": next.enabled = c.events
            case "events_max_bytes": next.maxBytes = c.eventsMaxBytes
            case "app_version": next.appVersion = c.appVersion.map { $0.map(String.init).joined(separator: ".") }
            default: return nil
            }
            guard next != kept else { return nil }
            kept = next
            do { try next.save(store) } catch let e as AssetPatchError { return e.message } catch { return "\(error)" }
            return nil
        }
        if let failure { log(.warning, "outcome events: \(failure)") }
    }

    /// The outbox, with the bound in force.
    var outbox: EventOutbox { store.outbox(maxBytes: eventContext.withLock { $0.maxBytes }) }

    /// Appends `events` in order, the last one made durable; then hands each to the live
    /// callback. `package`: the package when the caller knows it (else the pinned one).
    func emit(_ events: [OutcomeEvent], package known: String? = nil, state: StoreState? = nil) {
        let context = eventContext.withLock { $0 }
        guard context.enabled, !events.isEmpty else { return }
        let config = configuration
        let package = known ?? config.package ?? (state ?? (try? store.loadState()))?.pin?.name
        var device: String?
        if let id = try? store.rolloutID() {
            device = OutcomeEvent.device(package: package ?? "default", rolloutID: id)
        }
        let common = OutcomeEvent.Common(package: package, appVersion: context.appVersion, device: device,
                                         channel: config.channel ?? Channel.defaultName)
        let box = outbox
        let time = unixTime()
        var appended: [String] = []
        do {
            for (i, event) in events.enumerated() {
                let entry = try box.append(durable: i == events.count - 1) { event.line(seq: $0, stream: $1, time: time, common) }
                appended.append(entry.json)
            }
        } catch let e as AssetPatchError {
            log(.warning, "outcome events: \(e.message)")
        } catch {}
        if let fn = eventCallback.withLock({ $0 }) {
            for line in appended { fn(line) }
        }
    }

    func emit(_ event: OutcomeEvent, package: String? = nil, state: StoreState? = nil) {
        emit([event], package: package, state: state)
    }

    /// A `rollback` event when `from`, the active release before a change of the state, is not
    /// the active one after it.
    func emitLeft(_ from: ReleaseRef?, _ state: StoreState, _ cause: OutcomeEvent.RollbackCause) {
        guard let from, state.active?.id != from.id else { return }
        emit(OutcomeEvent(.rollback, version: from.version, channel: from.channelName,
                          [("cause", .string(cause.rawValue)), ("to", .int(state.active?.version ?? 0))]), state: state)
    }

    // MARK: The host's side

    /// The oldest events not acknowledged yet (`EventOutbox.read`).
    package func readEvents(limit: Int = .max, maxBytes: Int = .max) throws -> [EventOutbox.Entry] {
        try loggingFailure { try outbox.read(limit: limit, maxBytes: maxBytes) }
    }

    /// Acknowledges the events up to `seq`: never read again.
    package func acknowledgeEvents(through seq: UInt64) throws {
        try loggingFailure { try outbox.acknowledge(through: seq) }
    }

    package func eventsInfo() throws -> EventOutbox.Info {
        try loggingFailure { try outbox.info() }
    }

    /// Called with each event's JSON as this client appends it, on the thread that appended
    /// it (nil: none). Events appended before it was set, or by other clients, are read from
    /// the outbox.
    package func setEventCallback(_ fn: (@Sendable (String) -> Void)?) {
        eventCallback.withLock { $0 = fn }
    }
}

/// What the open of a data directory did that events report, gathered under the state lock.
struct OpenFacts {
    var activated: ReleaseRef?
    var launched: (ref: ReleaseRef, count: Int, max: Int)?
    var rollback: (record: RollbackRecord, cause: OutcomeEvent.RollbackCause, channel: String)?

    /// The events, in the order they happened.
    var events: [OutcomeEvent] {
        var out: [OutcomeEvent] = []
        if let a = activated {
            out.append(OutcomeEvent(.activate, version: a.version, channel: a.channelName, [("apply", .string("next_open"))]))
        }
        if let l = launched {
            out.append(OutcomeEvent(.launch, version: l.ref.version, channel: l.ref.channelName,
                                    [("launches", .int(Int64(l.count))), ("max_failed_launches", .int(Int64(l.max)))]))
        }
        if let r = rollback {
            out.append(OutcomeEvent(.rollback, version: r.record.from, channel: r.channel,
                                    [("cause", .string(r.cause.rawValue)), ("to", .int(r.record.to))]))
        }
        return out
    }
}

/// What an update's progress showed, for its events: when each phase began and the bytes the
/// download phase counted.
final class UpdateTimeline {
    private(set) var phase = Phase.check
    private var began: [Phase: UInt64] = [:]
    private(set) var downloadBytes: UInt64 = 0
    let start = monotonicMillis()

    /// The host's handler, with the timeline noting what passes through it.
    func observing(_ host: ProgressHandler?) -> ProgressHandler {
        { [self] p in
            if began[p.phase] == nil { began[p.phase] = monotonicMillis() }
            phase = p.phase
            if p.phase == .download { downloadBytes = max(downloadBytes, p.bytesDone) }
            return host?(p) ?? false
        }
    }

    func reached(_ phase: Phase) -> Bool { began[phase] != nil }

    /// Milliseconds from `phase`'s start to the next phase's (or to now).
    func duration(_ phase: Phase) -> Int64 {
        guard let from = began[phase] else { return 0 }
        let next = began.filter { $0.key.rawValue > phase.rawValue }.map(\.value).min() ?? monotonicMillis()
        return Int64(next >= from ? next - from : 0)
    }
}

extension Client {
    /// The `check` event of a check or update.
    func checkEvent(_ e: Evaluation, _ status: Status, source: Int?) -> OutcomeEvent {
        var fields: [(String, JSON)] = [("result", .string(status.eventCode))]
        let reason: String? = status == .noUpdate ? e.noUpdate.map {
            switch $0.reason {
            case .current: "current"
            case .older: "older"
            case .badVersion: "bad_version"
            case .inBundle: "in_bundle"
            case .notInRollout: "not_in_rollout"
            case .channelBehind: "channel_behind"
            }
        } : nil
        fields.append(("reason", reason.map { .string($0) } ?? .null))
        let offered = e.noUpdate?.version ?? e.offered
        if let r = e.rollout {
            fields.append(("rollout", .object([("basis_points", .int(Int64(r.basisPoints))), ("bucket", .int(Int64(r.bucket))),
                                               ("taken", .bool(Rollout.takes(bucket: r.bucket, percent: Double(r.basisPoints) / 100)))])))
        } else {
            fields.append(("rollout", .null))
        }
        fields.append(("source", source.map { .int(Int64($0)) } ?? .null))
        return OutcomeEvent(.check, version: offered, channel: e.channel, fields)
    }

    /// The events of an update: its check, then what it reached (download, install, activate),
    /// the step that failed carrying the failure.
    func updateEvents(_ e: Evaluation, _ status: Status, _ timeline: UpdateTimeline, source: Int?, apply: ApplyMode) -> [OutcomeEvent] {
        if !e.headRead && (status == .busy || status == .state) { return [] }  // nothing was checked
        let offered = e.offered
        // A failure after the check found the release (the index, free space, the download) is
        // the update's, reported as its download's or install's.
        let checkFailed = status != .ok && !e.updating
        var out = [checkEvent(e, checkFailed || status == .noUpdate ? status : .ok, source: source)]
        guard !checkFailed, status != .noUpdate, e.updating else { return out }
        let failedIn: Phase? = status == .ok ? nil : (timeline.reached(.install) || timeline.reached(.activate) ? .install : .download)
        if e.route != "kept" {
            out.append(OutcomeEvent(.download, version: offered, channel: e.channel, [
                ("result", .string((failedIn == .download ? status : .ok).eventCode)),
                ("bytes", .number(String(timeline.downloadBytes))), ("duration_ms", .int(timeline.duration(.download))),
                ("route", e.route.map { .string($0) } ?? .null), ("resumed", .bool(e.resumed)),
                ("source", .int(Int64(source ?? 0))),
            ]))
            if failedIn == .download { return out }
            out.append(OutcomeEvent(.install, version: offered, channel: e.channel, [
                ("result", .string(status.eventCode)), ("duration_ms", .int(timeline.duration(.install))),
                ("apply", .string(apply == .immediate ? "immediate" : "next_open")),
            ]))
        }
        if status == .ok && apply == .immediate {
            out.append(OutcomeEvent(.activate, version: offered, channel: e.channel, [("apply", .string("immediate"))]))
        }
        return out
    }

}
