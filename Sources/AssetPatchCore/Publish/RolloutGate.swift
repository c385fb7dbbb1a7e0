/// The publisher's gate over a staged rollout (`assetpatch rollout advance`): it counts what
/// devices reported about a channel's release (outcome events, `OutcomeEvent`), judges the
/// counts against a policy, and says whether to take the next step, hold, or halt, and why.
/// It never advances without enough devices having settled (confirmed the release or rolled
/// back from it).

/// Steps and thresholds, from a JSON document:
/// `{"steps": [1, 5, 25, 100], "min_devices": 50, "max_crash_loop_rate": 0.02,
///   "max_rollback_rate": 0.05, "max_install_failure_rate": 0.05, "max_plugin_failure_rate": 0.02}`.
package struct RolloutPolicy: Sendable, Equatable {
    /// The shares the rollout moves through, increasing, the last 100.
    package var steps: [Double]
    /// Devices that must have settled on the release before it may advance.
    package var minDevices: Int
    package var maxCrashLoopRate: Double
    package var maxRollbackRate: Double
    package var maxInstallFailureRate: Double
    package var maxPluginFailureRate: Double

    package init(steps: [Double] = [1, 5, 25, 100], minDevices: Int = 50, maxCrashLoopRate: Double = 0.02,
                 maxRollbackRate: Double = 0.05, maxInstallFailureRate: Double = 0.05, maxPluginFailureRate: Double = 0.02) {
        self.steps = steps
        self.minDevices = minDevices
        self.maxCrashLoopRate = maxCrashLoopRate
        self.maxRollbackRate = maxRollbackRate
        self.maxInstallFailureRate = maxInstallFailureRate
        self.maxPluginFailureRate = maxPluginFailureRate
    }

    package static func decode(_ bytes: [UInt8], source: String) throws -> RolloutPolicy {
        func fail(_ what: String) -> AssetPatchError { AssetPatchError(.argument, "\(source): \(what)") }
        let json: JSON
        do { json = try JSONParser.parse(bytes) } catch { throw fail("not valid JSON: \(JSONParser.describe(error))") }
        guard case let .object(pairs) = json else { throw fail("expected a JSON object") }
        let known: Set = ["steps", "min_devices", "max_crash_loop_rate", "max_rollback_rate", "max_install_failure_rate",
                          "max_plugin_failure_rate"]
        if let unknown = pairs.first(where: { !known.contains($0.0) }) { throw fail("unknown field \"\(unknown.0)\"") }
        var p = RolloutPolicy()
        if let s = json["steps"] {
            guard let items = s.array, !items.isEmpty, items.count <= 100 else { throw fail("steps must be an array of 1 to 100 shares") }
            p.steps = try items.map {
                guard let t = $0.numberText, let v = Double(t), Rollout.isValidPercent(v), v > 0 else {
                    throw fail("steps must be shares above 0, up to 100")
                }
                return v
            }
            guard zip(p.steps, p.steps.dropFirst()).allSatisfy({ $0 < $1 }), p.steps.last == 100 else {
                throw fail("steps must increase and end at 100")
            }
        }
        if let m = json["min_devices"] {
            guard let n = m.int64, n >= 1, n <= 100_000_000 else { throw fail("min_devices must be a whole number from 1") }
            p.minDevices = Int(n)
        }
        func rate(_ key: String, _ into: inout Double) throws {
            guard let v = json[key] else { return }
            guard let t = v.numberText, let r = Double(t), r >= 0, r <= 1 else { throw fail("\(key) must be a rate from 0 to 1") }
            into = r
        }
        try rate("max_crash_loop_rate", &p.maxCrashLoopRate)
        try rate("max_rollback_rate", &p.maxRollbackRate)
        try rate("max_install_failure_rate", &p.maxInstallFailureRate)
        try rate("max_plugin_failure_rate", &p.maxPluginFailureRate)
        return p
    }

    package func toJSON() -> JSON {
        .object([("steps", .array(steps.map { .number(Rollout.format($0)) })), ("min_devices", .int(Int64(minDevices))),
                 ("max_crash_loop_rate", .number(String(maxCrashLoopRate))), ("max_rollback_rate", .number(String(maxRollbackRate))),
                 ("max_install_failure_rate", .number(String(maxInstallFailureRate))),
                 ("max_plugin_failure_rate", .number(String(maxPluginFailureRate)))])
    }
}

/// Devices that reported each outcome for one release (each device counted once per outcome).
package struct RolloutCounts: Sendable, Equatable {
    /// Devices whose check was offered the release and took it (in the rollout).
    package var offered = 0
    /// Devices that installed it (any apply mode) and that failed to install it and never did.
    package var installed = 0
    package var installFailed = 0
    /// Devices that activated it (at once, or at the next open).
    package var activated = 0
    /// Devices that confirmed it (mark_good).
    package var markedGood = 0
    /// Devices that rolled back from it after a crash loop, and for any cause but an app upgrade.
    package var crashLoops = 0
    package var rollbacks = 0
    /// Devices on which one of its plugins failed to load.
    package var pluginFailures = 0
    /// Devices that confirmed it or rolled back from it: whose outcome is known.
    package var settled = 0
    /// Event lines read, and those that were not events of this release.
    package var events = 0
    package var otherEvents = 0

    package init() {}

    /// Counts the events of `package`'s release `version` on `channel` in JSON lines (or JSON
    /// arrays of events). Lines that are not JSON objects are refused with their line number:
    /// a gate must not judge a half-read export.
    package static func count(_ inputs: [(name: String, bytes: [UInt8])], package: String, channel: String,
                              version: Int64) throws -> RolloutCounts {
        try Outcomes(inputs, package: package, channel: channel, version: version).counts(of: nil)
    }

    /// The counts of every device, and the same per rollout step: each device under the share
    /// (in basis points) in force at its first check that took the release (devices with no
    /// such check under -1). The events are read once for both.
    package static func tally(_ inputs: [(name: String, bytes: [UInt8])], package: String, channel: String,
                              version: Int64) throws -> (all: RolloutCounts, steps: [(basisPoints: Int, counts: RolloutCounts)]) {
        let o = try Outcomes(inputs, package: package, channel: channel, version: version)
        let steps = Set(o.step.values).union(o.devices.subtracting(o.step.keys).isEmpty ? [] : [-1]).sorted()
        return (o.counts(of: nil), steps.map { ($0, o.counts(of: $0)) })
    }

    /// Each device's outcomes for one release, read from events.
    struct Outcomes {
        var sets: [String: Set<String>] = [:]
        var failedInstall = Set<String>()
        /// The share in force (basis points) at each device's first check that took the release.
        var step: [String: Int] = [:]
        var devices = Set<String>()
        var events = 0, otherEvents = 0

        init(_ inputs: [(name: String, bytes: [UInt8])], package: String, channel: String, version: Int64) throws {
            for input in inputs {
                var start = 0, lineNumber = 0
                let bytes = input.bytes
                while start < bytes.count {
                    let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
                    lineNumber += 1
                    let line = bytes[start..<end]
                    start = end + 1
                    guard line.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { continue }
                    let json: JSON
                    do { json = try JSONParser.parse(Array(line)) } catch {
                        throw AssetPatchError(.argument, "\(input.name):\(lineNumber): not a JSON event: \(JSONParser.describe(error))")
                    }
                    if let items = json.array {
                        for item in items where item.isObject { note(item, package, channel, version) }
                    } else if json.isObject {
                        note(json, package, channel, version)
                    } else {
                        throw AssetPatchError(.argument, "\(input.name):\(lineNumber): not a JSON event")
                    }
                }
            }
        }

        mutating func note(_ e: JSON, _ package: String, _ channel: String, _ version: Int64) {
            events += 1
            guard e["package"]?.string == package, e["channel"]?.string == channel, e["version"]?.int64 == version,
                  let device = e["device"]?.string, let kind = e["event"]?.string else {
                otherEvents += 1
                return
            }
            devices.insert(device)
            let result = e["result"]?.string
            switch kind {
            case OutcomeEvent.Kind.check.rawValue:
                if result == "ok", e["rollout"]?["taken"] != .bool(false) {
                    sets["offered", default: []].insert(device)
                    if step[device] == nil { step[device] = Int(e["rollout"]?["basis_points"]?.int64 ?? 10000) }
                }
            case OutcomeEvent.Kind.install.rawValue:
                if result == "ok" { sets["installed", default: []].insert(device) } else if result != Status.cancelled.eventCode {
                    failedInstall.insert(device)
                }
            case OutcomeEvent.Kind.activate.rawValue, OutcomeEvent.Kind.launch.rawValue:
                sets["activated", default: []].insert(device)
            case OutcomeEvent.Kind.markedGood.rawValue:
                sets["good", default: []].insert(device)
            case OutcomeEvent.Kind.rollback.rawValue:
                // What the release did: a crash loop, or the host's own judgement; not an app
                // upgrade or a host's change of settings (app_version, keys, package).
                let cause = e["cause"]?.string
                guard cause == OutcomeEvent.RollbackCause.crashLoop.rawValue || cause == OutcomeEvent.RollbackCause.host.rawValue else { break }
                sets["rollback", default: []].insert(device)
                if cause == OutcomeEvent.RollbackCause.crashLoop.rawValue { sets["crash", default: []].insert(device) }
            case OutcomeEvent.Kind.pluginLoadFailed.rawValue:
                sets["plugin", default: []].insert(device)
            default:
                break
            }
        }

        /// The counts of the devices of one step (nil: every device).
        func counts(of stepBasisPoints: Int?) -> RolloutCounts {
            func kept(_ s: Set<String>?) -> Set<String> {
                guard let bp = stepBasisPoints else { return s ?? [] }
                return (s ?? []).filter { (step[$0] ?? -1) == bp }
            }
            let installed = kept(sets["installed"])
            var c = RolloutCounts()
            c.offered = kept(sets["offered"]).count
            c.installed = installed.count
            c.installFailed = kept(failedInstall).subtracting(installed).count
            c.activated = kept(sets["activated"]).count
            c.markedGood = kept(sets["good"]).count
            c.crashLoops = kept(sets["crash"]).count
            c.rollbacks = kept(sets["rollback"]).count
            c.pluginFailures = kept(sets["plugin"]).count
            c.settled = kept(sets["good"]).union(kept(sets["rollback"])).count
            c.events = events
            c.otherEvents = otherEvents
            return c
        }
    }

    package func toJSON() -> JSON {
        .object([("offered", .int(Int64(offered))), ("installed", .int(Int64(installed))), ("install_failed", .int(Int64(installFailed))),
                 ("activated", .int(Int64(activated))), ("marked_good", .int(Int64(markedGood))),
                 ("crash_loops", .int(Int64(crashLoops))), ("rollbacks", .int(Int64(rollbacks))),
                 ("plugin_failures", .int(Int64(pluginFailures))), ("settled", .int(Int64(settled))),
                 ("events", .int(Int64(events))), ("other_events", .int(Int64(otherEvents)))])
    }
}

/// What the gate decided, and why.
package struct GateDecision: Sendable, Equatable {
    package enum Action: String, Sendable {
        /// Take the next step (`to`).
        case advance
        /// Not enough data, or nothing wrong yet and nothing to do: sign nothing.
        case hold
        /// A threshold is crossed: offer the release to no more clients (share 0).
        case halt
        /// The release is offered to every client already, or was halted before: nothing to do.
        case complete, halted
    }

    /// One measured rate against its threshold.
    package struct Rate: Sendable, Equatable {
        package var name: String
        package var failures: Int
        package var devices: Int
        package var max: Double
        package var rate: Double { devices == 0 ? 0 : Double(failures) / Double(devices) }
        /// Over the threshold with min_devices or more; with fewer, more failures than the
        /// threshold allows at min_devices (a halt need not wait for the sample a good verdict
        /// needs: those devices failed whatever the others will report).
        package func crossed(minDevices: Int) -> Bool {
            devices >= minDevices ? rate > max : Double(failures) / Double(minDevices) > max
        }
    }

    package var action: Action
    package var from: Double?
    package var to: Double?
    package var rates: [Rate]
    package var reasons: [String]
}

package enum RolloutGate {
    /// Each rate the policy bounds, measured from `counts`.
    package static func rates(_ policy: RolloutPolicy, _ counts: RolloutCounts) -> [GateDecision.Rate] {
        [
            GateDecision.Rate(name: "crash_loop_rate", failures: counts.crashLoops, devices: counts.settled, max: policy.maxCrashLoopRate),
            GateDecision.Rate(name: "rollback_rate", failures: counts.rollbacks, devices: counts.settled, max: policy.maxRollbackRate),
            GateDecision.Rate(name: "install_failure_rate", failures: counts.installFailed,
                              devices: counts.installed + counts.installFailed, max: policy.maxInstallFailureRate),
            GateDecision.Rate(name: "plugin_failure_rate", failures: counts.pluginFailures, devices: counts.activated,
                              max: policy.maxPluginFailureRate)
        ]
    }

    /// Judges `counts` for a release offered at `current` % (nil: to every client).
    /// `settledAtStep`: devices settled among those that took the release at the share in force
    /// (nil: not known, every settled device counts): an advance needs min_devices of them, so
    /// a gate run twice on one export never takes two steps on one step's devices.
    package static func decide(_ policy: RolloutPolicy, current: Double?, counts: RolloutCounts,
                               settledAtStep: Int? = nil) -> GateDecision {
        let rates = rates(policy, counts)
        var d = GateDecision(action: .hold, from: current, to: nil, rates: rates, reasons: [])
        guard let current, current < 100 else {
            d.action = .complete
            d.reasons = ["the release is offered to every client: nothing to advance"]
            return d
        }
        if current == 0 {
            d.action = .halted
            d.reasons = ["the release is halted (share 0): publish a fix, or set a share with assetpatch rollout --percent"]
            return d
        }
        let crossed = rates.filter { $0.crossed(minDevices: policy.minDevices) }
        if !crossed.isEmpty {
            d.action = .halt
            d.to = 0
            d.reasons = crossed.map {
                "\($0.name) \(format($0.rate)) (\($0.failures) of \($0.devices) devices) is over \(format($0.max))"
                    + ($0.devices < policy.minDevices ? ": \($0.failures) failures exceed \(format($0.max)) of min_devices \(policy.minDevices) already" : "")
            }
            return d
        }
        guard counts.settled >= policy.minDevices else {
            d.reasons = ["\(counts.settled) devices settled (confirmed or rolled back) of the \(policy.minDevices) min_devices needed; \(counts.activated) activated"]
            return d
        }
        if let here = settledAtStep, here < policy.minDevices {
            d.reasons = ["\(here) devices settled among those that took it at \(Rollout.format(current))% of the \(policy.minDevices) min_devices needed (\(counts.settled) at every step)"]
            return d
        }
        guard let next = policy.steps.first(where: { $0 > current }) else {
            d.reasons = ["no step above \(Rollout.format(current))% in the policy"]
            return d
        }
        d.action = .advance
        d.to = next
        d.reasons = ["\(counts.settled) devices settled, every rate within its threshold: \(Rollout.format(current))% → \(Rollout.format(next))%"]
        return d
    }

    package static func format(_ rate: Double) -> String {
        let tenths = Int((rate * 1000).rounded())
        return "\(tenths / 10).\(tenths % 10)%"
    }

    package static func toJSON(_ d: GateDecision, policy: RolloutPolicy, counts: RolloutCounts, package: String, channel: String,
                               version: Int64) -> JSON {
        func share(_ p: Double?) -> JSON { p.map { .number(Rollout.format($0)) } ?? .null }
        return .object([
            ("decision", .string(d.action.rawValue)), ("package", .string(package)), ("channel", .string(channel)),
            ("version", .int(version)), ("from", share(d.from)), ("to", share(d.to)),
            ("reasons", .array(d.reasons.map { .string($0) })),
            ("rates", .object(d.rates.map {
                ($0.name, .object([("rate", .number(String($0.rate))), ("failures", .int(Int64($0.failures))),
                                   ("devices", .int(Int64($0.devices))), ("max", .number(String($0.max))),
                                   ("crossed", .bool($0.crossed(minDevices: policy.minDevices)))]))
            })),
            ("counts", counts.toJSON()), ("policy", policy.toJSON()),
        ])
    }
}
