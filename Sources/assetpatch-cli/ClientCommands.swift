import ArgumentParser
import AssetPatchCore
import Glibc

struct ClientOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "The client's data directory.") var dataDir: String
    @Option(name: .customLong("bundle-dir"), help: "The app's shipped resources (fallback).") var bundleDir: String?

    /// The tool is not the app: its opens count no launch towards max_failed_launches.
    func open() throws -> Client {
        try Client(dataDir: dataDir, bundleDir: bundleDir, countsLaunch: false)
    }

    /// Runs `body` on an opened client (closed afterwards), failures reported as the tool does.
    func with<T>(_ body: (Client) throws -> T) throws -> T {
        try cli {
            let c = try open()
            defer { c.close() }
            return try body(c)
        }
    }
}

struct SourceOptions: ParsableArguments {
    @Option(name: .long, help: "The manifest URL (https://, http:// or file://).") var url: String

    @Option(name: .long, help: "Comma-separated on-demand groups this client wants with every update (its language, its scale).")
    var groups: String?

    @Option(name: .long, help: "The same head as --url on another host (repeatable): tried after it, in order (option mirrors).")
    var mirror: [String] = []

    @Option(name: .customLong("hedge-ms"), help: "A source silent for this long has its work started on the next one too (default 500; 0: off).")
    var hedgeMs: UInt64?

    func configure(_ client: Client) throws {
        try client.set("manifest_url", url)
        if !mirror.isEmpty { try client.set("mirrors", mirror.joined(separator: ",")) }
        if let hedgeMs { try client.set("hedge_ms", String(hedgeMs)) }
        if let groups { try client.set("groups", groups) }
        try trust.configure(client)
    }

    @OptionGroup var trust: TrustOptions
}

/// What a manifest is judged with: keys, the app's version, the CA bundle.
struct TrustOptions: ParsableArguments {
    @Option(name: .customLong("public-key"), help: "Trusted base64 Ed25519 public key (repeatable).") var publicKey: [String] = []
    @Option(name: .customLong("app-version"), help: "This app's version, for min_app_version.") var appVersion: String?
    @Option(name: .customLong("ca-file"), help: "PEM bundle of trusted CAs (default: $ASSETPATCH_CA_FILE when set, else libcurl's own).") var caFile: String?
    @Option(name: .long, help: "The app's package: manifests of another package are refused.") var package: String?
    @Option(name: .customLong("key-document"), help: "A pinned key document (a repository's keys/N.json): trust starts from it.")
    var keyDocument: String?
    @Option(name: .long, help: "The channel this client follows from now on (the data directory keeps it): manifests of another channel are refused; naming another channel moves the client to it, to a lower version too.")
    var channel: String?
    @Option(name: .customLong("rollout-id"), help: "Who this client is in staged rollouts (default: the data directory's random id).")
    var rolloutID: String?

    func configure(_ client: Client) throws {
        if !publicKey.isEmpty { try client.set("public_keys", publicKey.joined(separator: ",")) }
        if let keyDocument { try client.set("key_document", keyDocument) }
        if let channel { try client.set("channel", channel) }
        if let rolloutID { try client.set("rollout_id", rolloutID) }
        if let package { try client.set("package", package) }
        if let appVersion { try client.set("app_version", appVersion) }
        if let ca = caFile ?? getenv("ASSETPATCH_CA_FILE").map({ String(cString: $0) }), !ca.isEmpty { try client.set("ca_file", ca) }
    }
}

func formatBytes(_ n: UInt64) -> String {
    if n < 1024 { return "\(n) B" }
    let units = ["KiB", "MiB", "GiB", "TiB"]
    var v = Double(n) / 1024
    var u = 0
    while v >= 1024 && u < units.count - 1 { v /= 1024; u += 1 }
    let tenths = Int((v * 10).rounded())
    return "\(tenths / 10).\(tenths % 10) \(units[u])"
}

let phaseNames: [Phase: String] = [.check: "check", .download: "download", .install: "install", .activate: "activate", .done: "done"]

/// A progress bar on a terminal; one line per phase otherwise.
final class ProgressPrinter {
    let tty = isatty(STDERR_FILENO) != 0
    var lastPhase: Phase?
    var last = Progress(phase: .check)

    func show(_ p: Progress) -> Bool {
        let name = phaseNames[p.phase] ?? "?"
        if tty {
            if let lastPhase, lastPhase != p.phase { writeStderr("\n") }
            var line = "\r\(name.padding(8))"
            if p.bytesTotal > 0 {
                let width = 30
                let filled = Int(min(p.bytesDone, p.bytesTotal) * UInt64(width) / p.bytesTotal)
                line += " [" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "]"
                line += " \(min(100, p.bytesDone * 100 / p.bytesTotal))% \(formatBytes(p.bytesDone)) / \(formatBytes(p.bytesTotal))"
            } else if p.bytesDone > 0 {
                line += " \(formatBytes(p.bytesDone))"
            }
            if p.filesTotal > 0 { line += " \(p.filesDone)/\(p.filesTotal) files" + reusedText(p) }
            if p.paused { line += " (paused)" }
            writeStderr(line + "\u{1B}[K")
            if p.phase == .done { writeStderr("\n") }
        } else if lastPhase != p.phase {
            if let lastPhase, lastPhase != .done { printPhaseEnd(lastPhase) }
            if p.phase == .done { writeStderr("done\n") }
        }
        lastPhase = p.phase
        last = p
        return false
    }

    private func printPhaseEnd(_ phase: Phase) {
        var line = "\(phaseNames[phase] ?? "?")"
        if last.bytesDone > 0 || last.bytesTotal > 0 { line += " \(formatBytes(last.bytesDone))" }
        if last.filesTotal > 0 { line += " \(last.filesDone)/\(last.filesTotal) files" + reusedText(last) }
        writeStderr(line + "\n")
    }

    /// Install: what came from disk, apart from what this update fetched.
    private func reusedText(_ p: Progress) -> String {
        p.filesReused > 0 || p.bytesReused > 0 ? " (\(p.filesReused) files, \(formatBytes(p.bytesReused)) from disk)" : ""
    }
}

extension String {
    func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
}

struct Update: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Update the data directory to the newest release (exit 0 installed, 2 current, 4 not rolled out to this client, 5 older manifest, 6 rolled back from, 3 failure).")
    @OptionGroup var client: ClientOptions
    @OptionGroup var source: SourceOptions
    @OptionGroup var transfer: TransferOptions
    @Flag(name: .long, help: "Print what happened as JSON: status, reason, versions, channel, rollout share and bucket, key document, expiry.")
    var json = false

    func run() throws {
        try Outcome.run(client, source, json: json) { c in
            let signals = try transfer.configure(c, priorityOption: "update_priority")
            defer { signals.forEach { $0.cancel() } }
            let printer = ProgressPrinter()
            let installed = try c.update { json ? false : printer.show($0) }
            return (installed ? "installed" : "no_update", nil)
        }
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Tell whether a newer release exists and what updating would transfer (exit 0 available, 2 current, 4 not rolled out to this client, 5 older manifest, 6 rolled back from, 3 failure). No archive byte is downloaded.")
    @OptionGroup var client: ClientOptions
    @OptionGroup var source: SourceOptions
    @Flag(name: .long, help: "Print what was found as JSON (as update --json, with \"next\": what the update would transfer).")
    var json = false

    func run() throws {
        try Outcome.run(client, source, json: json) { c in
            let found = try c.preview()
            return (found == nil ? "no_update" : "available", found)
        }
    }
}

struct Resolve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the path each resource name resolves to, one per line.")
    @OptionGroup var client: ClientOptions
    @Option(name: .long, help: "Comma-separated variant suffixes, e.g. \"@2x,\".") var variants: String?
    @Argument(help: "Resource names.") var names: [String]

    func run() throws {
        let failed = try client.with { c -> Bool in
            if let variants { try c.set("variants", variants) }
            var failed = false
            for n in names {
                do { print(try c.resolve(n)) } catch let e as AssetPatchError {
                    printError("\(e.status.name): \(e.message)")
                    failed = true
                }
            }
            return failed
        }
        if failed { throw ExitCode(3) }
    }
}

struct MarkGood: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mark-good",
                                                    abstract: "Confirm the active release: it is no longer rolled back automatically.")
    @OptionGroup var client: ClientOptions

    func run() throws {
        try client.with { c in
            try c.markGood()
            print("version \(c.currentVersion) marked good")
        }
    }
}

struct Rollback: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Go back to the previous kept release (or the bundle); updates skip the version left.")
    @OptionGroup var client: ClientOptions

    func run() throws {
        try client.with { c in
            let now = try c.rollback(reason: "rolled back with assetpatch rollback")
            print(now == 0 ? "rolled back: serving the bundle" : "rolled back to version \(now)")
        }
    }
}

struct Reset: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Drop every release and partial download; serve the bundle only (the downgrade mark stays).")
    @OptionGroup var client: ClientOptions

    func run() throws {
        try client.with { c in
            try c.reset()
            print("reset: serving the bundle only")
        }
    }
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the active, kept and pending releases; with --url, what an update would fetch.")
    @Option(name: .customLong("data-dir"), help: "The client's data directory.") var dataDir: String
    @Option(name: .customLong("bundle-dir"), help: "The app's shipped resources (files an update can take from it).") var bundleDir: String?
    @Option(name: .long, help: "A manifest URL: also show what an update from it would do (nothing is downloaded).") var url: String?
    @OptionGroup var trust: TrustOptions
    @Flag(name: .long, help: "Print JSON.") var json = false

    func run() throws {
        try cli {
            let store = try Store(root: dataDir)
            let s = try store.loadState()
            let usage = store.usage()
            let bytes = usage.releases + usage.downloads + usage.other
            var next: UpdatePreview?
            var checked = false
            var why = ""
            var lastOutcome: CheckOutcome?
            let keyDocuments = store.followedKeyDocuments()
            if let url {
                let c = try Client(dataDir: dataDir, bundleDir: bundleDir, countsLaunch: false)
                defer { c.close() }
                try c.set("manifest_url", url)
                try trust.configure(c)
                next = try c.preview(recordAcceptance: false)
                why = noUpdateReason(c)
                lastOutcome = c.lastCheck
                checked = true
            }
            if json {
                var pairs: [(String, JSON)] = [
                    ("active", .int(s.active?.version ?? 0)),
                    ("kept", .array(s.kept.map { .int($0.version) })),
                    ("pending", s.pending.map { .int($0.version) } ?? .null),
                    ("bad", .array(s.bad.map { .int($0) })),
                    ("data_bytes", .int(Int64(bytes))),
                    ("release_bytes", .int(Int64(usage.releases))),
                    ("download_bytes", .int(Int64(usage.downloads))),
                    ("marked_good", .bool(s.activeIsGood)),
                    ("launches", .int(Int64(s.launches))),
                    ("max_failed_launches", .int(Int64(s.maxFailedLaunches))),
                    ("bundle_version", .int(s.bundleVersion)),
                    ("channel", .string(s.channelPin?.name ?? s.active?.channelName ?? Channel.defaultName)),
                    ("rollout_id", store.existingRolloutID().map { .string($0) } ?? .null),
                    ("key_documents", .array(keyDocuments.map { .int($0.version) })),
                    ("groups", .array(activeGroups(store, s).map { g in
                        JSON.object([("name", .string(g.group.name)), ("delivery", .string(g.group.delivery.name)),
                                     ("state", .string(g.local ? "local" : "absent")), ("pinned", .bool(g.pinned)),
                                     ("files", .int(Int64(g.group.files))), ("bytes", .int(Int64(g.group.size)))])
                    })),
                    ("last_rollback", s.lastRollback.map { r in
                        JSON.object([("from", .int(r.from)), ("to", .int(r.to)), ("reason", .string(r.reason)),
                                     ("time", .string(RFC3339.format(r.time)))])
                    } ?? .null),
                ]
                pairs.append(("named_head", store.keptNamedHead().map { k in
                    JSON.object([("manifest_url", .string(URLs.redacted(k.manifestURL))), ("head", .string(k.reference))])
                } ?? .null))
                if checked {
                    pairs.append(("read", lastOutcome?.namedHead.map { .string($0) } ?? .string("manifest_url")))
                    pairs.append(("next", next.map(previewJSON) ?? .null))
                    pairs.append(("offered_expires", lastOutcome?.manifestExpires.map { .string(RFC3339.format($0)) } ?? .null))
                    if next == nil { pairs.append(("no_update", .string(why))) }
                }
                print(JSON.object(pairs).serialized())
                return
            }
            var active = s.active.map { "version \($0.version)" } ?? "bundle only"
            if s.active != nil {
                active += s.activeIsGood ? " (marked good)" : " (not marked good; \(s.launches) launch\(s.launches == 1 ? "" : "es") counted"
                    + (s.maxFailedLaunches > 0 ? ", rolled back after \(s.maxFailedLaunches))" : ")")
            }
            print("active:   \(active)")
            print("kept:     \(s.kept.isEmpty ? "none" : s.kept.map { String($0.version) }.joined(separator: ", "))")
            print("pending:  \(s.pending.map { "version \($0.version)" } ?? "none")")
            if !s.bad.isEmpty { print("bad:      \(s.bad.map(String.init).joined(separator: ", ")) (skipped by updates)") }
            if let r = s.lastRollback {
                print("rollback: \(RFC3339.format(r.time)) from version \(r.from) to \(r.to == 0 ? "the bundle" : "version \(r.to)"): \(r.reason)")
            }
            if let p = s.pin {
                let by = ["option": "named by the package option", "bundle": "named by the bundle marker",
                          "verified_manifest": "pinned by a verified manifest", "manifest": "pinned by an unverified manifest"][p.source.rawValue] ?? ""
                print("package:  \(p.name) (\(by); highest accepted version \(s.highestVersion), \(s.highestVerifiedVersion ?? 0) verified)")
            }
            if s.bundleVersion > 0 { print("bundle:   carries version \(s.bundleVersion)") }
            if let p = s.channelPin {
                let by = ["option": "named by the host (option channel)", "verified_manifest": "pinned by a verified manifest",
                          "manifest": "pinned by an unverified manifest"][p.source.rawValue] ?? ""
                print("channel:  \(p.name) (\(by))")
            } else if let a = s.active {
                print("channel:  \(a.channelName) (the active release's)")
            }
            for (name, mark) in s.channelMarks.sorted(by: { $0.key < $1.key }) where s.channelMarks.count > 1 || name != Channel.defaultName {
                print("          channel \(name): highest accepted \(mark.highest), \(mark.highestVerified?.description ?? "version 0") verified")
            }
            print("rollout:  id \(store.existingRolloutID() ?? "not created yet (made at the first check of a staged rollout)")")
            for doc in keyDocuments {
                print("keys:     key document \(doc.version) followed (signing \(doc.signing.described); expires \(doc.expires.map(RFC3339.format) ?? "never"))")
            }
            for g in activeGroups(store, s) {
                print("group:    \(g.group.name) \(g.local ? "local" : "absent")\(g.pinned ? ", pinned" : "") (\(g.group.delivery.name), \(g.group.files) files, \(formatBytes(g.group.size)))")
            }
            if let k = store.keptNamedHead() {
                print("head:     \(k.reference), named by \(URLs.redacted(k.manifestURL)) (read in its place)")
            }
            print("disk:     \(formatBytes(bytes)): releases \(formatBytes(usage.releases)), downloads \(formatBytes(usage.downloads))")
            if checked {
                if let o = lastOutcome, o.manifestVersion > 0 {
                    print("offered:  version \(o.manifestVersion), expires \(expiryLine(o.manifestExpires))"
                          + (o.namedHead.map { " (read from \($0), the head the URL names)" } ?? ""))
                }
                if let next { printPreview(next) } else { print("next:     no update: \(why)") }
            }
        }
    }
}

/// Why the client's last check found nothing, as a sentence.
func noUpdateReason(_ c: Client) -> String {
    guard let o = c.lastCheck else { return "version \(c.currentVersion) is current" }
    switch o.reason {
    case .older?: return "the manifest offers version \(o.manifestVersion), older than version \(o.acceptedVersion) accepted before (a stale cache, or a replay)"
    case .badVersion?: return "the manifest offers version \(o.manifestVersion), which was rolled back from"
    case .inBundle?: return "the app's bundle carries version \(o.manifestVersion) or newer"
    case .notInRollout?:
        if o.rollout?.basisPoints == 0 { return "version \(o.manifestVersion) is halted (its rollout is at 0%): no client that lacks it takes it" }
        let share = o.rollout.map { "\(Double($0.basisPoints) / 100)%" } ?? "?"
        return "version \(o.manifestVersion) is rolled out to \(share) of clients; this client's bucket \(o.rollout?.bucket ?? -1) of 10000 is not among them"
    case .channelBehind?:
        return "channel \(o.channel ?? "?") offers version \(o.manifestVersion), lower than the release installed from another channel"
    case .current?, nil: return "version \(c.currentVersion) is current"
    }
}

/// The preview's lines as `status` and `inspect` print them.
func printPreview(_ p: UpdatePreview) {
    print("next:     version \(p.version)")
    if let reason = p.wholeArchiveReason {
        print("fetch:    the whole archive, \(formatBytes(p.transferBytes)) (\(reason))")
        return
    }
    var share = ""
    if p.archiveBytes > 0 {
        let permille = p.transferBytes * 1000 / p.archiveBytes
        share = " (\(permille / 10).\(permille % 10)% of the \(formatBytes(p.archiveBytes)) archive)"
    }
    print("fetch:    differential, \(p.fetchedFiles.count) files in \(p.requests) range requests, \(formatBytes(p.transferBytes))\(share)")
    print("reuse:    \(p.linkedFiles) files linked from installed releases, \(p.bundleFiles) copied from the bundle")
    for f in p.fetchedFiles.prefix(50) { print("  \(f)") }
    if p.fetchedFiles.count > 50 { print("  ... \(p.fetchedFiles.count - 50) more") }
}

func previewJSON(_ p: UpdatePreview) -> JSON {
    .object([("version", .int(p.version)), ("method", .string(p.wholeArchiveReason == nil ? "differential" : "whole")),
             ("reason", p.wholeArchiveReason.map { .string($0) } ?? .null),
             ("transfer_bytes", .int(Int64(p.transferBytes))), ("archive_bytes", .int(Int64(p.archiveBytes))),
             ("requests", .int(Int64(p.requests))), ("fetch", .array(p.fetchedFiles.map { .string($0) })),
             ("linked_files", .int(Int64(p.linkedFiles))), ("bundle_files", .int(Int64(p.bundleFiles)))])
}
