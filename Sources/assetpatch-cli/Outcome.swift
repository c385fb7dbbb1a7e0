import ArgumentParser
import AssetPatchCore
import Glibc

/// What `check` and `update` found, for scripts: a distinct exit status per outcome and, with
/// `--json`, one JSON object on stdout (also for a failure).
///
///     0  update: installed; check: a newer release is available
///     2  no update: the release served is current (or the app's bundle carries it)
///     3  failure (the status name and message on stderr)
///     4  no update: the release is not rolled out to this client, or it is halted
///     5  no update: the manifest is older than one accepted before (a stale cache, a replay)
///     6  no update: the manifest offers a version this client rolled back from
enum Outcome {
    static func exitCode(_ reason: NoUpdateReason?) -> Int32 {
        switch reason {
        case .notInRollout?: return 4
        case .older?: return 5
        case .badVersion?: return 6
        case .current?, .inBundle?, .channelBehind?, nil: return 2
        }
    }

    static func reasonName(_ r: NoUpdateReason?) -> JSON {
        switch r {
        case .current?: return .string("current")
        case .older?: return .string("older")
        case .badVersion?: return .string("bad_version")
        case .inBundle?: return .string("in_bundle")
        case .notInRollout?: return .string("not_in_rollout")
        case .channelBehind?: return .string("channel_behind")
        case nil: return .null
        }
    }

    /// The object `--json` prints: `status` ("installed", "available", "no_update", "error"),
    /// the reason, the versions, the channel, the rollout share and bucket, the key document in
    /// force, the manifest's expiry, and for a check what the update would transfer.
    static func json(_ c: Client, status: String, preview: UpdatePreview? = nil, error: AssetPatchError? = nil) -> JSON {
        let o = c.lastCheck
        var pairs: [(String, JSON)] = [("status", .string(status)),
                                       ("reason", status == "no_update" ? reasonName(o?.reason) : .null),
                                       ("offered_version", o.map { $0.manifestVersion > 0 ? .int($0.manifestVersion) : .null } ?? .null),
                                       ("current_version", .int(c.currentVersion)),
                                       ("accepted_version", .int(o?.acceptedVersion ?? 0)),
                                       ("channel", o?.channel.map { .string($0) } ?? .null)]
        pairs.append(("rollout", o?.rollout.map { r in
            .object([("percent", .number(Rollout.format(Double(r.basisPoints) / 100))), ("bucket", .int(Int64(r.bucket)))])
        } ?? .null))
        pairs.append(("key_document", c.keyDocumentInForce.map { .int($0.version) } ?? .null))
        pairs.append(("expires", o?.manifestExpires.map { .string(RFC3339.format($0)) } ?? .null))
        // What was read: manifest_url, or the head the manifest there names.
        pairs.append(("read", o?.namedHead.map { .string($0) } ?? (o?.manifestVersion ?? 0 > 0 ? .string("manifest_url") : .null)))
        if !c.lastSources.isEmpty {
            pairs.append(("sources", .array(c.lastSources.map { e in
                .object([("url", .string(e.head.shown)), ("last", .string(e.last)), ("demoted", .bool(e.demoted != nil)),
                         ("requests", .int(Int64(e.requests))), ("bytes", .int(Int64(e.bytes)))])
            })))
        }
        if let preview { pairs.append(("next", previewJSON(preview))) }
        if let error { pairs.append(("error", .object([("status", .string("\(error.status.name)")), ("message", .string(error.message))]))) }
        return .object(pairs)
    }

    /// With mirrors: each source's last result, on stderr (stdout stays the outcome's line).
    static func printSources(_ c: Client) {
        for e in c.lastSources {
            writeStderr("source \(e.head.shown): \(e.requests) requests, \(e.bytes) bytes\(e.demoted != nil ? ", demoted" : ""); \(e.last)\n")
        }
    }

    /// Runs a check or an update: prints what it found (text, or JSON) and ends with the
    /// outcome's exit status.
    static func run(_ options: ClientOptions, _ source: SourceOptions, json: Bool,
                    _ body: (Client) throws -> (status: String, preview: UpdatePreview?)) throws {
        let c: Client
        do { c = try options.open() } catch let e as AssetPatchError { throw e.cli }
        defer { c.close() }
        do {
            try source.configure(c)
            let (status, preview) = try body(c)
            if json {
                print(Outcome.json(c, status: status, preview: preview).serialized(indent: 2))
            } else if status == "no_update" {
                print("no update: \(noUpdateReason(c))")
            } else if status == "installed" {
                print("updated to version \(c.currentVersion)")
            } else if let preview {
                print("version \(preview.version) available, \(preview.transferBytes) bytes to download"
                      + (preview.wholeArchiveReason.map { ": the whole archive (\($0))" } ?? " by range requests"))
            }
            if !json, let head = c.lastCheck?.namedHead { writeStderr("read \(head), the head manifest_url names\n") }
            if !json { printSources(c) }
            if status == "no_update" { throw ExitCode(exitCode(c.lastCheck?.reason)) }
        } catch let e as AssetPatchError {
            if json { print(Outcome.json(c, status: "error", error: e).serialized(indent: 2)) } else { printSources(c) }
            throw e.cli
        }
    }
}
