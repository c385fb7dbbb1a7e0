import ArgumentParser
import AssetPatchCore
import Glibc

/// `assetpatch events`: the data directory's outcome events as JSON lines.
struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the outcome events not acknowledged yet, as JSON lines, oldest first (docs/release-management.md, \"Rollout health\").")
    @Option(name: .customLong("data-dir"), help: "The client's data directory.") var dataDir: String
    @Flag(name: .long, help: "Acknowledge the events printed once they are written to stdout: no later read returns them.")
    var ack = false
    @Option(name: .customLong("ack-through"), help: "Acknowledge every event up to this seq, print nothing.") var ackThrough: UInt64?
    @Option(name: .long, help: "Print at most this many events.") var limit: Int?
    @Flag(name: .long, help: "Print the outbox's counts as JSON instead (pending, first_seq, last_seq, acked_seq, dropped, bytes).")
    var info = false

    func run() throws {
        try cli {
            // The outbox alone: reading events is not an open of the data directory.
            guard FS.isDirectory(dataDir) else { throw AssetPatchError(.io, "\(dataDir): not a directory") }
            let outbox = try Store(root: FS.absolute(dataDir)).outbox()
            if let ackThrough {
                try outbox.acknowledge(through: ackThrough)
                return
            }
            if info {
                let i = try outbox.info()
                print(JSON.object([("pending", .number(String(i.pending))), ("first_seq", .number(String(i.firstSeq))),
                                   ("last_seq", .number(String(i.lastSeq))), ("acked_seq", .number(String(i.acked))),
                                   ("dropped", .number(String(i.dropped))), ("bytes", .number(String(i.bytes)))]).serialized())
                return
            }
            let events = try outbox.read(limit: limit ?? .max)
            var out = events.map { $0.json + "\n" }.joined()
            let written = out.withUTF8 { b -> Bool in
                var off = 0
                while off < b.count {
                    let n = write(STDOUT_FILENO, b.baseAddress! + off, b.count - off)
                    if n <= 0 { return false }
                    off += n
                }
                return true
            }
            guard written else { throw AssetPatchError(.io, "stdout: \(String(cString: strerror(errno))); nothing acknowledged") }
            if ack, let last = events.last?.seq { try outbox.acknowledge(through: last) }
        }
    }
}

/// `assetpatch rollout advance`: the gate's options.
struct GateOptions: ParsableArguments {
    @Option(name: .long, help: "advance: the rollout policy: a JSON file with steps and thresholds (default: steps 1,5,25,100; min_devices 50; max_crash_loop_rate 0.02; max_rollback_rate 0.05; max_install_failure_rate 0.05; max_plugin_failure_rate 0.02).")
    var policy: String?
    @Option(name: .long, help: "advance: outcome events as JSON lines (assetpatch events, or your analytics' export), repeatable; - reads stdin.")
    var events: [String] = []
    @Flag(name: .long, help: "advance: print the decision, its reasons, rates and counts as JSON.") var json = false

    /// Counts the devices' outcome events for the channel's release and signs the policy's next
    /// step, holds, or halts it (exit 0 advanced or nothing to do, 2 held, 4 halted, 3 failure).
    func run(repo: String, remote: RemoteRepositoryOptions, channel: String, signing: SigningOptions, dryRun: Bool) throws {
        let action = try remote.within(repo, signing: signing, dryRun: dryRun) { dir in try cli { () -> GateDecision.Action in
            guard Channel.isValid(channel) else { throw AssetPatchError(.argument, "\(channel): not a channel name") }
            guard !events.isEmpty else { throw AssetPatchError(.argument, "give the devices' events with --events FILE (a gate never advances on no data)") }
            let dir = FS.absolute(dir)
            guard let current = try ChannelManifests.read(repo: dir, channel: channel) else {
                throw AssetPatchError(.argument, "channel \"\(channel)\" has no manifest in \(repo)")
            }
            let rules = try policy.map { try RolloutPolicy.decode(try FS.readFile($0, limit: 1 << 20, limitStatus: .argument), source: $0) }
                ?? RolloutPolicy()
            let inputs = try events.map { name -> (name: String, bytes: [UInt8]) in
                (name, name == "-" ? try readStdin() : try FS.readFile(name, limit: 4 << 30, limitStatus: .argument))
            }
            let (counts, steps) = try RolloutCounts.tally(inputs, package: current.package, channel: channel, version: current.version)
            let share = current.rollout?.percent(at: unixTime())
            let here = share.map { s in steps.first { $0.basisPoints == Int(Rollout.basisPoints(s)) }?.counts.settled ?? 0 }
            let decision = RolloutGate.decide(rules, current: share, counts: counts, settledAtStep: here)
            var signed: ChannelRelease?
            if !dryRun, decision.action == .advance || decision.action == .halt, let to = decision.to {
                signed = try ChannelManifests.rewrite(repo: dir, channel: channel, rollout: to >= 100 ? nil : Rollout(percent: to),
                                                      keepRollout: false, expiry: try signing.expiry(default: .keep),
                                                      seeds: try signing.seeds())
            }
            if json {
                print(RolloutGate.toJSON(decision, policy: rules, counts: counts, package: current.package, channel: channel,
                                         version: current.version).serialized(indent: 2))
            } else {
                let what: String
                switch decision.action {
                case .advance: what = "advance to \(Rollout.format(decision.to ?? 100))%"
                case .halt: what = "halt"
                case .hold: what = "hold at \(Rollout.format(share ?? 100))%"
                case .complete: what = "complete"
                case .halted: what = "halted"
                }
                print("\(dryRun && signed == nil && (decision.action == .advance || decision.action == .halt) ? "would: " : "")channel \(channel) version \(current.version): \(what)\(signed.map { signedLine($0) } ?? "")")
                for r in decision.reasons { print("  " + r) }
                print("  devices: \(counts.offered) offered, \(counts.activated) activated, \(counts.markedGood) marked good, \(counts.crashLoops) crash loops, \(counts.rollbacks) rollbacks, \(counts.installFailed) install failures, \(counts.pluginFailures) plugin failures (\(counts.events) events, \(counts.otherEvents) of other releases)")
            }
            return decision.action
        } }
        switch action {
        case .hold: throw ExitCode(2)
        case .halt: throw ExitCode(4)
        default: return
        }
    }
}

func readStdin() throws -> [UInt8] {
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
        if n < 0 { throw AssetPatchError(.io, "stdin: \(String(cString: strerror(errno)))") }
        if n == 0 { return out }
        out += chunk[0..<n]
    }
}
