import Glibc

/// One release as a channel offers it: the payloads of its format-1 manifest (`manifest.json`)
/// and of its head (`head.json`; nil in repositories published before heads existed), with the
/// archive URL relative to the repository's root. Rewritten as JSON, so every field a publish
/// wrote survives a promotion, a rollout change or a re-signing byte for byte.
package struct ChannelRelease {
    package var manifest: JSON
    package var head: JSON?

    package var version: Int64 { manifest["version"]?.int64 ?? 0 }
    package var package: String { manifest["package"]?.string ?? "default" }
    package var archiveSHA: String { manifest["archive"]?["sha256"]?.string ?? "" }
    package var rollout: Rollout? { manifest["rollout"].flatMap { try? Rollout.decode($0, source: "manifest") } }

    func map(_ transform: (JSON) -> JSON) -> ChannelRelease {
        ChannelRelease(manifest: transform(manifest), head: head.map(transform))
    }
}

/// Reading and writing channels' manifests, and the repository's release history.
///
/// Layout: the default channel's manifests are the repository's `manifest.json` and
/// `head.json`; channel NAME's are `channels/NAME/manifest.json` and `head.json` (archive and
/// key document URLs in them start with `../../`). `history/<version>/` keeps every published
/// release's unsigned payloads, with root-relative URLs, for `promote --version` and for the
/// rule that one version number names one archive whichever channel offers it.
package enum ChannelManifests {
    package static func directory(repo: String, channel: String) -> String {
        let sub = Channel.directory(channel)
        return sub.isEmpty ? repo : repo + "/" + String(sub.dropLast())
    }

    /// The channels holding a manifest: the default one first, then every `channels/NAME`.
    package static func names(repo: String) -> [String] {
        var names = FS.exists(repo + "/manifest.json") ? [Channel.defaultName] : []
        for n in ((try? FS.list(repo + "/channels")) ?? []).sorted() where Channel.isValid(n) && n != Channel.defaultName {
            if FS.exists(repo + "/channels/\(n)/manifest.json") { names.append(n) }
        }
        return names
    }

    /// What `channel` offers now, nil when it has no manifest (signatures are not checked: this
    /// is the publisher's own repository).
    package static func read(repo: String, channel: String) throws -> ChannelRelease? {
        let dir = directory(repo: repo, channel: channel)
        guard FS.exists(dir + "/manifest.json") else { return nil }
        let manifest = try payload(dir + "/manifest.json")
        let head = FS.exists(dir + "/head.json") ? try payload(dir + "/head.json") : nil
        let prefix = Channel.relativeToChannel(channel, "")
        // Back to root-relative URLs.
        return ChannelRelease(manifest: manifest, head: head).map { json in
            guard !prefix.isEmpty else { return json }
            var j = json
            if let url = j["archive"]?["url"]?.string, url.hasPrefix(prefix) {
                j = j.setting("archive", j["archive"]!.setting("url", .string(String(url.dropFirst(prefix.count)))))
            }
            if let url = j["keys"]?["url"]?.string, url.hasPrefix(prefix) {
                j = j.setting("keys", j["keys"]!.setting("url", .string(String(url.dropFirst(prefix.count)))))
            }
            return deltaURLs(j) { $0.hasPrefix(prefix) ? String($0.dropFirst(prefix.count)) : $0 }
        }
    }

    /// The head with each delta file's URL (`index.deltas`) passed through `transform`.
    static func deltaURLs(_ j: JSON, _ transform: (String) -> String) -> JSON {
        guard let index = j["index"], let list = index["deltas"]?.array else { return j }
        return j.setting("index", index.setting("deltas", .array(list.map { d in
            d["url"]?.string.map { d.setting("url", .string(transform($0))) } ?? d
        })))
    }

    /// The version and package `channel` offers, nil when it has no manifest: read without
    /// its list of files (a million of them are no reason to build a tree of JSON).
    package static func offered(repo: String, channel: String) throws -> (version: Int64, package: String)? {
        let path = directory(repo: repo, channel: channel) + "/manifest.json"
        guard FS.exists(path) else { return nil }
        let header = ChannelRelease(manifest: try payload(path, listingFiles: false), head: nil)
        return (header.version, header.package)
    }

    /// The release published as `version`, from the history; refused when it came from a
    /// bucket unchecked (`RepositoryPull`).
    package static func history(repo: String, version: Int64) throws -> ChannelRelease? {
        let dir = repo + "/history/\(version)"
        guard FS.exists(dir + "/manifest.json") else { return nil }
        if unchecked(repo: repo).contains(version) {
            throw AssetPatchError(.signature, "history/\(version) came from the bucket unchecked: the history keeps no signature, and no head signed by a key this command trusts names version \(version). Run with --trust-bucket to sign it anyway, or from a repository you keep")
        }
        return ChannelRelease(manifest: try payload(dir + "/manifest.json"),
                              head: FS.exists(dir + "/head.json") ? try payload(dir + "/head.json") : nil)
    }

    /// Where a working copy lists the history's releases taken from a bucket unchecked.
    package static let uncheckedName = ".assetpatch-unchecked.json"

    package static func unchecked(repo: String) -> Set<Int64> {
        guard let bytes = try? FS.readFile(repo + "/" + uncheckedName, limit: 1 << 20), let list = (try? JSONParser.parse(bytes))?.array else { return [] }
        return Set(list.compactMap(\.int64))
    }

    static func markUnchecked(repo: String, _ versions: Set<Int64>) throws {
        let path = repo + "/" + uncheckedName
        if versions.isEmpty {
            if FS.exists(path) { try FS.unlink(path) }
            return
        }
        try FS.writeAtomically(path, Array((JSON.array(versions.sorted().map { .int($0) }).serialized() + "\n").utf8))
    }

    /// The highest version any channel offers or the history holds.
    package static func highestVersion(repo: String) -> Int64 {
        var v: Int64 = 0
        for n in names(repo: repo) { v = max(v, (try? offered(repo: repo, channel: n))??.version ?? 0) }
        // Releases a pull could not check don't count: a number planted in a bucket's history
        // would otherwise set every later version (or overflow it).
        let marked = unchecked(repo: repo)
        for n in (try? FS.list(repo + "/history")) ?? [] {
            if let n = Int64(n), !marked.contains(n), n < Int64.max / 2 { v = max(v, n) }
        }
        return v
    }

    /// Records a published release (the fields a channel's signing sets stripped: they are the
    /// channel's). A version the history holds is never published again, whichever channel.
    static func recordHistory(repo: String, _ r: ChannelRelease) throws {
        let dir = repo + "/history/\(r.version)"
        guard !FS.exists(dir + "/manifest.json") else {
            throw AssetPatchError(.argument, "version \(r.version) was published before (\(dir)): a version names one archive, whichever channel offers it; promote it, or publish a new version")
        }
        try FS.makeDirectories(dir)
        let plain = r.map { json in Manifest.signingFields.reduce(json) { $0.removing($1) } }
        try FS.writeAtomically(dir + "/manifest.json", Array((plain.manifest.serialized(indent: 2) + "\n").utf8))
        if let head = plain.head { try FS.writeAtomically(dir + "/head.json", Array((head.serialized(indent: 2) + "\n").utf8)) }
        try writeOffers(repo: repo, version: r.version, [])
    }

    /// Makes `channel` offer `release`: names the channel (the default one is not named, as
    /// before channels existed), sets or clears the rollout, names the newest key document,
    /// raises the channel's revision (every signing of a channel is newer than the one before:
    /// `ManifestOrder`), sets when it was signed and when it expires (`expiry`), writes URLs
    /// relative to the channel's directory, signs with `seeds` (a threshold of the newest key
    /// document's signing keys when the repository has key documents), records in the history
    /// that the channel offered the version, and writes `head.json`, then `manifest.json`, each
    /// with a modification time after the one it replaces (`MutableFile`).
    /// `dryRun`: everything is checked and computed, nothing written; returns what would be.
    @discardableResult
    package static func write(_ release: ChannelRelease, repo: String, channel: String, rollout: Rollout?, expiry: Expiry = .keep,
                              seeds: [[UInt8]], dryRun: Bool = false) throws -> ChannelRelease {
        let keys = try KeyDocuments.newest(repo: repo)
        if let keys { try KeyDocuments.checkSigners(seeds, against: keys) }
        let current = try read(repo: repo, channel: channel)
        let now = unixTime()
        let expires = try expiry.time(now: now, current: current?.manifest)
        let revision = (current?.manifest["revision"]?.int64 ?? 0) + 1
        let prefix = Channel.relativeToChannel(channel, "")
        var out = release.map { json in
            var j = Manifest.signingFields.reduce(json) { $0.removing($1) }
            if let url = j["archive"]?["url"]?.string, URLs.scheme(url) == nil {
                j = j.setting("archive", j["archive"]!.setting("url", .string(prefix + url)))
            }
            j = deltaURLs(j) { URLs.scheme($0) == nil ? prefix + $0 : $0 }
            if channel != Channel.defaultName { j = j.setting("channel", .string(channel)) }
            if let rollout { j = j.setting("rollout", rollout.toJSON()) }
            if let keys { j = j.setting("keys", KeyDocumentRef(version: keys.version, url: prefix + KeyDocuments.directoryName + "/").toJSON()) }
            j = j.setting("revision", .int(revision)).setting("signed", .string(RFC3339.format(now)))
            if let expires { j = j.setting("expires", .string(RFC3339.format(expires))) }
            return j
        }
        // A client given manifest.json reads the head beside it from then on (format.md, "The
        // head"): its chunks and paged index, without the host changing its URL.
        if out.head != nil { out.manifest = out.manifest.setting("head", .string("head.json")) }
        if dryRun { return out }
        let dir = directory(repo: repo, channel: channel)
        try FS.makeDirectories(dir)
        // The head first: a client reading manifest.json in between finds the head it names
        // not older, and follows it (format.md, "A host that gives manifest.json").
        for (name, json) in [("head.json", out.head), ("manifest.json", out.manifest)] {
            guard let json else { continue }
            let payload = Array((json.serialized(indent: 2) + "\n").utf8)
            let bytes = seeds.isEmpty ? payload : Array((try DSSE.seal(payload, seeds: seeds).serialized(indent: 2) + "\n").utf8)
            try MutableFile.write(dir + "/" + name, bytes)
        }
        try recordOffer(repo: repo, version: release.version, channel: channel)
        try recordSigning(repo: repo, channel: channel, out.manifest, time: now)
        return out
    }

    /// `history/signings.jsonl`: one line per signing of a channel (publish, promote, rollout,
    /// halt, resign), for the report's timeline. The publisher's record: clients never read it.
    static func recordSigning(repo: String, channel: String, _ manifest: JSON, time: Int64) throws {
        let line = JSON.object([("time", .string(RFC3339.format(time))), ("channel", .string(channel)),
                                ("version", manifest["version"] ?? .null), ("revision", manifest["revision"] ?? .null),
                                ("rollout", manifest["rollout"] ?? .null), ("expires", manifest["expires"] ?? .null)]).serialized()
        try FS.makeDirectories(repo + "/history")
        let file = try File.open(signingLogPath(repo), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, mode: 0o644)
        try file.write(Array((line + "\n").utf8))
    }

    package static func signingLogPath(_ repo: String) -> String { repo + "/history/signings.jsonl" }

    /// The channels that offered `version` (`history/<version>/channels.json`), in the order they
    /// did; nil when the history does not say (releases published before 0.5).
    package static func offeredBy(repo: String, version: Int64) -> [String]? {
        guard let bytes = try? FS.readFile(repo + "/history/\(version)/channels.json", limit: 1 << 20),
              let items = (try? JSONParser.parse(bytes))?["channels"]?.array else { return nil }
        return items.compactMap(\.string)
    }

    /// Adds `channel` to the channels that offered `version`, once it does. A release published
    /// before 0.5 has no record, and gets none: a partial one would refuse a promotion from the
    /// channel that really offered it.
    static func recordOffer(repo: String, version: Int64, channel: String) throws {
        guard var channels = offeredBy(repo: repo, version: version), !channels.contains(channel) else { return }
        channels.append(channel)
        try writeOffers(repo: repo, version: version, channels)
    }

    private static func writeOffers(repo: String, version: Int64, _ channels: [String]) throws {
        try FS.writeAtomically(repo + "/history/\(version)/channels.json",
                               Array((JSON.object([("channels", .array(channels.map { .string($0) }))]).serialized(indent: 2) + "\n").utf8))
    }

    /// Makes channel `to` offer what channel `from` offers (or the release published as
    /// `version`, which `from` must have offered at some point: the history says which archive
    /// it is): the same archive, nothing uploaded again, signed anew. The target's versions only
    /// go up.
    package static func promote(repo: String, from: String, to: String, version: Int64?, rollout: Rollout?, expiry: Expiry = .keep,
                                seeds: [[UInt8]], dryRun: Bool = false) throws -> ChannelRelease {
        guard from != to else { throw AssetPatchError(.argument, "--from and --to name the same channel \"\(from)\"") }
        guard let source = try read(repo: repo, channel: from) else {
            throw AssetPatchError(.argument, "channel \"\(from)\" has no manifest in \(repo)")
        }
        var release = source
        if let version, version != source.version {
            guard let old = try history(repo: repo, version: version) else {
                throw AssetPatchError(.argument, "version \(version) is not in \(repo)/history (channel \"\(from)\" offers \(source.version))")
            }
            guard version < source.version else {
                throw AssetPatchError(.argument, "channel \"\(from)\" offers version \(source.version); it never offered version \(version)")
            }
            guard let offered = offeredBy(repo: repo, version: version) else {
                throw AssetPatchError(.argument, "\(repo)/history/\(version) does not say which channels offered version \(version) (published before 0.5): promote it from the channel that offers it now, or publish it again as a new version")
            }
            guard offered.contains(from) else {
                throw AssetPatchError(.argument, "channel \"\(from)\" never offered version \(version) (offered by: \(offered.joined(separator: ", ")))")
            }
            release = old
        }
        if let current = try read(repo: repo, channel: to) {
            guard release.version > current.version else {
                throw AssetPatchError(.argument, "channel \"\(to)\" offers version \(current.version); promoting version \(release.version) would move it \(release.version == current.version ? "nowhere" : "back") (versions of a channel only go up)")
            }
            guard current.package == release.package else {
                throw AssetPatchError(.argument, "channel \"\(to)\" offers package \"\(current.package)\", channel \"\(from)\" package \"\(release.package)\"")
            }
        }
        return try write(release, repo: repo, channel: to, rollout: rollout, expiry: expiry, seeds: seeds, dryRun: dryRun)
    }

    /// A rollback release: the next version, carrying the archive of version `version` from the
    /// history (nothing is uploaded again), offered by `channel`. Clients on the bad version
    /// take it as an ordinary update.
    package static func rollbackRelease(repo: String, channel: String, to version: Int64, rollout: Rollout?, expiry: Expiry,
                                        seeds: [[UInt8]], dryRun: Bool = false) throws -> ChannelRelease {
        guard let old = try history(repo: repo, version: version) else {
            throw AssetPatchError(.argument, "version \(version) is not in \(repo)/history")
        }
        if let current = try read(repo: repo, channel: channel), current.package != old.package {
            throw AssetPatchError(.argument, "channel \"\(channel)\" offers package \"\(current.package)\", version \(version) is of package \"\(old.package)\"")
        }
        let next = highestVersion(repo: repo) + 1
        let created = JSON.string(RFC3339.format(unixTime()))
        let release = old.map { $0.setting("version", .int(next)).setting("created", created) }
        if !dryRun { try recordHistory(repo: repo, release) }
        return try write(release, repo: repo, channel: channel, rollout: rollout, expiry: expiry, seeds: seeds, dryRun: dryRun)
    }

    /// Re-signs `channel`'s manifests with a new rollout (nil: every client), or, with
    /// `keepRollout`, with the rollout it has (a re-signing, e.g. after a key rotation).
    package static func rewrite(repo: String, channel: String, rollout: Rollout?, keepRollout: Bool, expiry: Expiry = .keep,
                                seeds: [[UInt8]], dryRun: Bool = false) throws -> ChannelRelease {
        guard let current = try read(repo: repo, channel: channel) else {
            throw AssetPatchError(.argument, "channel \"\(channel)\" has no manifest in \(repo)")
        }
        return try write(current, repo: repo, channel: channel, rollout: keepRollout ? current.rollout : rollout, expiry: expiry, seeds: seeds,
                         dryRun: dryRun)
    }

    /// The largest manifest file read from the publisher's own repository: a format-1 manifest
    /// lists every file with its location, about 300 bytes each once enveloped, so a catalog
    /// of a million files is some 300 MB.
    static let maxManifestBytes = 1 << 30

    /// A manifest file's payload: the envelope's (unverified) or the plain JSON. Without
    /// `listingFiles` its "files" array is checked but read as empty: for what a channel
    /// offers (version, package), not for a manifest to be written again.
    static func payload(_ path: String, listingFiles: Bool = true) throws -> JSON {
        let bytes = try FS.readFile(path, limit: maxManifestBytes, limitStatus: .manifest)
        let parse = { (bytes: [UInt8]) throws -> JSON in
            listingFiles ? try JSONParser.parse(bytes) : try JSONParser.parse(bytes, streaming: "files", element: nil)
        }
        let json: JSON
        do { json = try parse(bytes) } catch {
            throw AssetPatchError(.manifest, "\(path): not valid JSON: \(JSONParser.describe(error))")
        }
        guard let text = json["payload"]?.string else { return json }
        guard let payload = Base64.decode(text), let inner = try? parse(payload) else {
            throw AssetPatchError(.manifest, "\(path): the envelope's payload is not base64 JSON")
        }
        return inner
    }
}
