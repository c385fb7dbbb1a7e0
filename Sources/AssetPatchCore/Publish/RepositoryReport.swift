/// What `assetpatch report` shows of a repository, from its files alone (no network): the
/// channels and what they offer, every signing over time (`history/signings.jsonl`), the key
/// chain, and the update-cost matrix: for every version a client may still run, the bytes its
/// update to each channel's current release would fetch (`RepositoryPlan`); with events, the
/// rollout's rates per step against the gate's policy.
package struct RepositoryReport {
    package struct ChannelRow {
        package var name: String
        package var package: String
        package var version: Int64
        package var label: String?
        package var rollout: Rollout?
        package var revision: Int64?
        package var signed: String?
        package var expires: String?
        package var archiveBytes: UInt64
    }

    /// One signing of a channel, from the signing log.
    package struct Signing {
        package var time: Int64
        package var channel: String
        package var version: Int64
        package var revision: Int64?
        /// The share signed (nil: every client; 0: a halt).
        package var percent: Double?
        package var schedule: Int
    }

    package struct KeyRow {
        package var version: Int64
        package var expires: Int64?
        package var root: KeySet
        package var signing: KeySet
    }

    /// What a client on `from` fetches to reach `channel`'s release (nil: it has it or newer).
    package struct Cost {
        package var from: Int64
        package var channel: String
        package var to: Int64
        package var bytes: UInt64?
        package var files: Int
        /// Large files counted whole: `bytes` is then an upper bound.
        package var upperBound: Bool
    }

    /// One rollout step's devices and rates, for the channel's current release.
    package struct StepHealth {
        package var channel: String
        package var version: Int64
        /// The share in force when those devices took it, in basis points (-1: not known).
        package var basisPoints: Int
        package var counts: RolloutCounts
        package var rates: [GateDecision.Rate]
    }

    package var repo: String
    package var generated: Int64
    package var channels: [ChannelRow] = []
    package var signings: [Signing] = []
    package var keys: [KeyRow] = []
    /// Every version the history holds, newest first.
    package var versions: [Int64] = []
    package var costs: [Cost] = []
    package var health: [StepHealth] = []
    package var decisions: [(channel: String, decision: GateDecision)] = []
    package var policy: RolloutPolicy?

    package static func make(repo: String, events: [(name: String, bytes: [UInt8])], policy: RolloutPolicy?) throws -> RepositoryReport {
        var r = RepositoryReport(repo: repo, generated: unixTime())
        let names = ChannelManifests.names(repo: repo)
        guard !names.isEmpty else { throw AssetPatchError(.argument, "\(repo): no channel's manifest (not a release repository?)") }
        for name in names {
            guard let c = try ChannelManifests.read(repo: repo, channel: name) else { continue }
            let m = c.manifest
            r.channels.append(ChannelRow(name: name, package: c.package, version: c.version, label: m["label"]?.string, rollout: c.rollout,
                                         revision: m["revision"]?.int64, signed: m["signed"]?.string, expires: m["expires"]?.string,
                                         archiveBytes: UInt64(max(0, m["archive"]?["size"]?.int64 ?? 0))))
        }
        r.signings = signings(repo: repo)
        for v in KeyDocuments.versions(repo: repo) {
            let d = try KeyDocuments.load(repo: repo, version: v)
            r.keys.append(KeyRow(version: d.version, expires: d.expires, root: d.root, signing: d.signing))
        }
        r.versions = ((try? FS.list(repo + "/history")) ?? []).compactMap { Int64($0) }.sorted(by: >)
        // Each channel's chunked files, read from its release's index once.
        var chunked: [String: Set<String>] = [:]
        for c in r.channels {
            if let release = try ChannelManifests.read(repo: repo, channel: c.name) { chunked[c.name] = RepositoryPlan.chunkedFiles(repo: repo, release) }
        }
        for from in [0] + r.versions {
            for c in r.channels {
                guard from < c.version else {
                    r.costs.append(Cost(from: from, channel: c.name, to: c.version, bytes: nil, files: 0, upperBound: false))
                    continue
                }
                let p = try RepositoryPlan.make(repo: repo, channel: c.name, from: from, rolloutID: nil, chunked: chunked[c.name])
                r.costs.append(Cost(from: from, channel: c.name, to: c.version, bytes: p.fetchBytes, files: p.fetchedFiles.count,
                                    upperBound: p.largeFiles > 0))
            }
        }
        if !events.isEmpty {
            let rules = policy ?? RolloutPolicy()
            r.policy = rules
            for c in r.channels {
                let (all, steps) = try RolloutCounts.tally(events, package: c.package, channel: c.name, version: c.version)
                for (bp, counts) in steps {
                    r.health.append(StepHealth(channel: c.name, version: c.version, basisPoints: bp, counts: counts,
                                               rates: RolloutGate.rates(rules, counts)))
                }
                let share = c.rollout?.percent(at: r.generated)
                let here = share.map { s in r.health.first { $0.channel == c.name && $0.basisPoints == Int(Rollout.basisPoints(s)) }?.counts.settled ?? 0 }
                r.decisions.append((c.name, RolloutGate.decide(rules, current: share, counts: all, settledAtStep: here)))
            }
        }
        return r
    }

    /// The signing log, oldest first (empty for repositories whose signings predate it).
    static func signings(repo: String) -> [Signing] {
        guard let bytes = try? FS.readFile(ChannelManifests.signingLogPath(repo), limit: 256 << 20) else { return [] }
        var out: [Signing] = []
        for line in bytes.split(separator: 0x0A) {
            guard let j = try? JSONParser.parse(Array(line)), let t = j["time"]?.string.flatMap(RFC3339.parse),
                  let channel = j["channel"]?.string, Channel.isValid(channel), let version = j["version"]?.int64 else { continue }
            let rollout = j["rollout"].flatMap { $0 == .null ? nil : try? Rollout.decode($0, source: "log") }
            out.append(Signing(time: t, channel: channel, version: version, revision: j["revision"]?.int64, percent: rollout?.percent,
                               schedule: rollout?.schedule.count ?? 0))
        }
        return out
    }

    /// The report as JSON: what the page shows, for scripts and for the page's test.
    package func toJSON() -> JSON {
        func opt(_ s: String?) -> JSON { s.map { .string($0) } ?? .null }
        func share(_ p: Double?) -> JSON { p.map { .number(Rollout.format($0)) } ?? .null }
        return .object([
            ("repo", .string(repo)), ("generated", .string(RFC3339.format(generated))),
            ("channels", .array(channels.map { c in
                .object([("name", .string(c.name)), ("package", .string(c.package)), ("version", .int(c.version)), ("label", opt(c.label)),
                         ("rollout", opt(c.rollout?.summary)), ("percent", share(c.rollout?.percent(at: generated))),
                         ("revision", c.revision.map { .int($0) } ?? .null), ("signed", opt(c.signed)), ("expires", opt(c.expires)),
                         ("archive_bytes", .int(Int64(c.archiveBytes)))])
            })),
            ("signings", .array(signings.map { s in
                .object([("time", .string(RFC3339.format(s.time))), ("channel", .string(s.channel)), ("version", .int(s.version)),
                         ("revision", s.revision.map { .int($0) } ?? .null), ("percent", share(s.percent)),
                         ("halt", .bool(s.percent == 0))])
            })),
            ("keys", .array(keys.map { k in
                .object([("version", .int(k.version)), ("expires", k.expires.map { .string(RFC3339.format($0)) } ?? .null),
                         ("root", .string(k.root.described)), ("signing", .string(k.signing.described))])
            })),
            ("versions", .array(versions.map { .int($0) })),
            ("costs", .array(costs.map { c in
                .object([("from", .int(c.from)), ("channel", .string(c.channel)), ("to", .int(c.to)),
                         ("bytes", c.bytes.map { .int(Int64($0)) } ?? .null), ("files", .int(Int64(c.files))),
                         ("upper_bound", .bool(c.upperBound))])
            })),
            ("health", .array(health.map { h in
                .object([("channel", .string(h.channel)), ("version", .int(h.version)),
                         ("percent", h.basisPoints < 0 ? .null : .number(Rollout.format(Double(h.basisPoints) / 100))),
                         ("counts", h.counts.toJSON()),
                         ("rates", .object(h.rates.map { ($0.name, .object([("rate", .number(String($0.rate))), ("max", .number(String($0.max))),
                                                                              ("devices", .int(Int64($0.devices))),
                                                                              ("crossed", .bool($0.crossed(minDevices: policy?.minDevices ?? 1)))])) }))])
            })),
            ("decisions", .array(decisions.map { .object([("channel", .string($0.channel)), ("decision", .string($0.decision.action.rawValue)),
                                                          ("reasons", .array($0.decision.reasons.map { .string($0) }))]) })),
        ])
    }
}
