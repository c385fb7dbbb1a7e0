import ArgumentParser
import AssetPatchCore
import Glibc

/// `--rollout P [--rollout-schedule S]` (or `--percent`/`--schedule`/`--halt`): nil when none
/// is given (every client).
func parseRollout(percent: String?, schedule: String?, halt: Bool) throws -> Rollout? {
    if halt {
        guard percent == nil, schedule == nil else { throw AssetPatchError(.argument, "--halt takes no percentage or schedule") }
        return Rollout(percent: 0)
    }
    guard let percent else {
        if schedule != nil { throw AssetPatchError(.argument, "a rollout schedule needs the share it starts from (--rollout/--percent)") }
        return nil
    }
    var r = Rollout(percent: try parsePercent(percent))
    let now = unixTime()
    for item in (schedule ?? "").split(separator: ",") {
        guard let eq = item.lastIndex(of: "=") else { throw AssetPatchError(.argument, "schedule step \"\(item)\": expected WHEN=PERCENT") }
        let when = String(item[..<eq]), share = try parsePercent(String(item[item.index(after: eq)...]))
        let at: Int64
        if let t = RFC3339.parse(when) { at = t } else if let d = parseDuration(when) { at = now + d } else {
            throw AssetPatchError(.argument, "schedule step \"\(item)\": \(when) is neither a duration (30m, 12h, 2d) nor an RFC 3339 time")
        }
        if let last = r.schedule.last, at <= last.at { throw AssetPatchError(.argument, "schedule step \"\(item)\" is not after the step before it") }
        r.schedule.append(Rollout.Step(at: at, percent: share))
    }
    return r
}

func parsePercent(_ text: String) throws -> Double {
    let t = text.hasSuffix("%") ? String(text.dropLast()) : text
    guard !t.isEmpty, t.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || $0 == 46 }), let p = Double(t), Rollout.isValidPercent(p) else {
        throw AssetPatchError(.argument, "\"\(text)\" is not a percentage from 0 to 100")
    }
    return p
}

/// "90s", "30m", "12h", "2d", "1w" in seconds.
func parseDuration(_ text: String) -> Int64? {
    guard let unit = text.last, let n = Int64(text.dropLast()), n >= 0 else { return nil }
    switch unit {
    case "s": return n
    case "m": return n * 60
    case "h": return n * 3600
    case "d": return n * 86400
    case "w": return n * 7 * 86400
    default: return nil
    }
}

struct Promote: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make one channel offer the release another channel offers: the same archive, signed anew.")

    @Option(name: .long, help: "The release repository: a directory, or s3://BUCKET/PREFIX (pulled, written, pushed back).") var repo: String
    @OptionGroup var remote: RemoteRepositoryOptions
    @Option(name: .long, help: "The channel whose release is promoted.") var from: String
    @Option(name: .long, help: "The channel that will offer it.") var to: String
    @Option(name: .long, help: "Promote this earlier version of --from instead of its current one.") var version: Int64?
    @OptionGroup var signing: SigningOptions
    @Option(name: .long, help: "Offer it to this share of --to's clients only.") var rollout: String?
    @Option(name: .customLong("rollout-schedule"), help: "WHEN=PERCENT,... as for publish.") var rolloutSchedule: String?
    @Flag(name: .customLong("dry-run"), help: "Check and show what would be signed; change nothing.") var dryRun = false

    func run() throws {
        try remote.within(repo, signing: signing, dryRun: dryRun) { dir in try cli {
            for c in [from, to] where !Channel.isValid(c) { throw AssetPatchError(.argument, "\(c): not a channel name") }
            let r = try ChannelManifests.promote(repo: FS.absolute(dir), from: from, to: to, version: version,
                                                 rollout: try parseRollout(percent: rollout, schedule: rolloutSchedule, halt: false),
                                                 expiry: try signing.expiry(default: .keep), seeds: try signing.seeds(), dryRun: dryRun)
            print("\(dryRun ? "would: " : "")channel \(to) offers \(r.package) version \(r.version) (archive \(r.archiveSHA.prefix(16))…) from channel \(from)\(signing.key.isEmpty ? "" : ", signed")\(signedLine(r))")
        } }
    }
}

struct RolloutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollout",
        abstract: "Change the share of clients a channel's release is offered to (re-signs its manifests); rollout advance: count the devices' outcome events and sign the policy's next step, hold, or halt (exit 0 advanced or nothing to do, 2 held, 4 halted, 3 failure).")

    @Argument(help: "advance: let the devices' outcome events decide (--events, --policy).") var action: String?

    @Option(name: .long, help: "The release repository: a directory, or s3://BUCKET/PREFIX (pulled, written, pushed back).") var repo: String
    @OptionGroup var remote: RemoteRepositoryOptions
    @Option(name: .long, help: "The channel (default: stable).") var channel: String = Channel.defaultName
    @OptionGroup var gate: GateOptions
    @Option(name: .long, help: "The share of clients, 0 to 100 (100: everyone, and the rollout is dropped from the manifest).")
    var percent: String?
    @Option(name: .long, help: "WHEN=PERCENT,... raising the share over time (WHEN: 30m, 12h, 2d, or an RFC 3339 time).") var schedule: String?
    @Flag(name: .long, help: "Stop offering the release to clients that don't have it (share 0).") var halt = false
    @OptionGroup var signing: SigningOptions
    @Flag(name: .customLong("dry-run"), help: "Check and show what would be signed; change nothing.") var dryRun = false

    func run() throws {
        if action != nil && percent == nil && schedule == nil && !halt && action == "advance" {
            return try gate.run(repo: repo, remote: remote, channel: channel, signing: signing, dryRun: dryRun)
        }
        try remote.within(repo, signing: signing, dryRun: dryRun) { dir in try cli {
            guard Channel.isValid(channel) else { throw AssetPatchError(.argument, "\(channel): not a channel name") }
            if let action {
                guard action == "advance" else { throw AssetPatchError(.argument, "\(action): the only action is advance") }
                guard percent == nil, schedule == nil, !halt else {
                    throw AssetPatchError(.argument, "rollout advance takes no --percent, --schedule or --halt: the policy sets the steps")
                }
                return
            }
            guard gate.events.isEmpty, gate.policy == nil, !gate.json else {
                throw AssetPatchError(.argument, "--events, --policy and --json go with rollout advance")
            }
            guard halt || percent != nil else { throw AssetPatchError(.argument, "give --percent P or --halt") }
            var rollout = try parseRollout(percent: percent, schedule: schedule, halt: halt)
            let dir = FS.absolute(dir)
            guard let current = try ChannelManifests.read(repo: dir, channel: channel) else {
                throw AssetPatchError(.argument, "channel \"\(channel)\" has no manifest in \(repo)")
            }
            rollout = RolloutChange.adjust(rollout, current: current, halt: halt, scheduleGiven: schedule != nil).map { warn($0) } ?? rollout
            if let r = rollout, r.percent == 100, r.schedule.isEmpty { rollout = nil }
            let release = try ChannelManifests.rewrite(repo: dir, channel: channel, rollout: rollout, keepRollout: false,
                                                       expiry: try signing.expiry(default: .keep), seeds: try signing.seeds(), dryRun: dryRun)
            print("\(dryRun ? "would: " : "")channel \(channel): version \(release.version) offered to \(rollout?.summary ?? "every client")\(signing.key.isEmpty ? "" : ", signed")\(signedLine(release))")
        } }
    }
}

struct Resign: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign a channel's manifests again, unchanged but for the newest key document and a new expiry (after a key rotation, or to renew them before they expire).")

    @Option(name: .long, help: "The release repository: a directory, or s3://BUCKET/PREFIX (pulled, written, pushed back).") var repo: String
    @OptionGroup var remote: RemoteRepositoryOptions
    @Option(name: .long, help: "The channel (default: every channel).") var channel: String?
    @OptionGroup var signing: SigningOptions
    @Flag(name: .customLong("dry-run"), help: "Check and show what would be signed; change nothing.") var dryRun = false

    func run() throws {
        try remote.within(repo, signing: signing, dryRun: dryRun) { dir in try cli {
            let dir = FS.absolute(dir)
            let seeds = try signing.seeds(), expiry = try signing.expiry(default: .keep)
            for name in channel.map({ [$0] }) ?? ChannelManifests.names(repo: dir) {
                let out = try ChannelManifests.rewrite(repo: dir, channel: name, rollout: nil, keepRollout: true, expiry: expiry,
                                                       seeds: seeds, dryRun: dryRun)
                print("\(dryRun ? "would: " : "")channel \(name): version \(out.version) signed anew\(signedLine(out))")
            }
        } }
    }
}

func warn(_ change: RolloutChange) -> Rollout? {
    for line in change.notes { printError("note: " + line) }
    return change.rollout
}

/// What a rollout change keeps of the rollout it replaces, and what it says about it: the steps
/// of a schedule still ahead that raise the new share are kept (`rollout --percent 25` on a
/// schedule going to 50% and 100% keeps them); a halt drops the schedule; narrowing a release
/// every client was offered holds back only those that have not installed it.
struct RolloutChange {
    var rollout: Rollout?
    var notes: [String]

    static func adjust(_ new: Rollout?, current: ChannelRelease, halt: Bool, scheduleGiven: Bool) -> RolloutChange? {
        let now = unixTime()
        let before = current.rollout
        var notes: [String] = []
        var result = new
        let ahead = before?.schedule.filter { $0.at > now } ?? []
        if halt {
            if !ahead.isEmpty { notes.append("the schedule's steps still ahead (\(steps(ahead))) are dropped: a halt holds until a rollout command raises it") }
            notes.append("clients that installed version \(current.version) keep it (their check says current); to take it back, publish a rollback release (a new version with the previous content)")
        } else if var r = new, !scheduleGiven, !ahead.isEmpty {
            let kept = ahead.filter { $0.percent > r.percent }
            let dropped = ahead.filter { $0.percent <= r.percent }
            r.schedule = kept
            result = r
            if !kept.isEmpty { notes.append("the schedule's steps still ahead that raise \(Rollout.format(r.percent))% are kept: \(steps(kept))") }
            if !dropped.isEmpty { notes.append("steps at or below \(Rollout.format(r.percent))% are dropped: \(steps(dropped))") }
        }
        let share = before?.percent(at: now) ?? 100
        if let r = result ?? (halt ? Rollout(percent: 0) : nil), r.percent(at: now) < share, !halt {
            notes.append("version \(current.version) was offered to \(Rollout.format(share))% of clients: those that installed it keep it; the narrower share holds back only those that have not")
        }
        return notes.isEmpty && result == new ? nil : RolloutChange(rollout: result, notes: notes)
    }

    private static func steps(_ s: [Rollout.Step]) -> String {
        s.map { "\(RFC3339.format($0.at))=\(Rollout.format($0.percent))%" }.joined(separator: ", ")
    }
}

/// What a signing wrote (or would): the revision and the expiry.
func signedLine(_ r: ChannelRelease) -> String {
    let revision = r.manifest["revision"]?.int64.map { ", revision \($0)" } ?? ""
    let expires = r.manifest["expires"]?.string.map { ", expires \($0)" } ?? ", expires never"
    return revision + expires
}

struct RollbackRelease: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollback-release",
        abstract: "Publish the next version carrying an earlier version's archive (from the history): clients on a bad release take it as an update.")

    @Option(name: .long, help: "The release repository: a directory, or s3://BUCKET/PREFIX (pulled, written, pushed back).") var repo: String
    @OptionGroup var remote: RemoteRepositoryOptions
    @Option(name: .long, help: "The earlier version whose content the new version carries.") var to: Int64
    @Option(name: .long, help: "The channel (default: stable).") var channel: String = Channel.defaultName
    @Option(name: .long, help: "Offer it to this share of clients only.") var rollout: String?
    @OptionGroup var signing: SigningOptions
    @Flag(name: .customLong("dry-run"), help: "Check and show what would be published; change nothing.") var dryRun = false

    func run() throws {
        try remote.within(repo, signing: signing, dryRun: dryRun) { dir in try cli {
            guard Channel.isValid(channel) else { throw AssetPatchError(.argument, "\(channel): not a channel name") }
            let r = try ChannelManifests.rollbackRelease(repo: FS.absolute(dir), channel: channel, to: to,
                                                         rollout: try parseRollout(percent: rollout, schedule: nil, halt: false),
                                                         expiry: try signing.expiry(default: .keep), seeds: try signing.seeds(), dryRun: dryRun)
            print("\(dryRun ? "would: " : "")channel \(channel) offers version \(r.version) carrying version \(to)'s archive (\(r.archiveSHA.prefix(16))…)\(signing.key.isEmpty ? "" : ", signed")\(signedLine(r))")
        } }
    }
}
