import Glibc

/// The manifest of an update or a check: fetched (conditionally, over HTTP), decoded and
/// verified (following the key documents' chain), and judged against what the client takes and
/// has (package, channel, expiry, the keys in force, versions, rollout, app version, size).
struct ManifestJudge {
    let store: Store
    let config: ClientConfig
    let context: FetchContext
    /// A look that changes nothing in the data directory.
    let readOnly: Bool
    /// A format-1 manifest that names a head is judged up to what reading the head changes,
    /// then left for the head (`Updater.evaluate`), unless it is of the order given here (its
    /// head was declined).
    var namesHead = false
    var declined: ManifestOrder? = nil
    /// The manifest's bytes as already fetched (`Evaluation.naming`): judged without a fetch.
    var served: (bytes: [UInt8], finalURL: String)? = nil
    var cancel: CancelToken { context.cancel }
    var log: (LogLevel, String) -> Void { context.log }
    var http: HTTPClient { context.http }

    /// A manifest that expires sooner than this is accepted with a warning (seconds).
    static let expiryWarning: Int64 = 14 * 86400
}

extension ManifestJudge {
    /// `conditional`: false after a 304 that named no kept copy (asked again plainly).
    func fetchManifest(_ state: StoreState, conditional: Bool = true) throws -> (bytes: [UInt8], finalURL: String) {
        guard let location = config.manifest else { throw AssetPatchError(.state, "no manifest_url set") }
        // Through a transport of the host's own, the head comes from manifest_url alone.
        if let sources = context.sources, http.settings.transport == nil {
            // Every source failed (a transient failure, the primary's first): tried again, with
            // the retry policy's waits.
            return try context.retrying(location) { try fetchHead(sources, state) }
        }
        switch location {
        case let .file(path, url):
            return (try FS.readFile(path, limit: config.maxManifestBytes, limitStatus: .manifest), url)
        case let .http(url):
            // A check that finds nothing new should cost one 304: the manifests last fetched from
            // this URL are kept with their validators, and a 304 reuses the copy it names
            // (decoded and verified again like any manifest). Racy validators are not kept (see
            // `Validators`).
            let cache = ManifestCache.load(from: store, url: url)
            let r = try context.retrying(location) {
                try http.fetch(url, limit: config.maxManifestBytes, limitStatus: .manifest,
                               conditions: conditional ? cache?.conditionalHeaders ?? [] : [])
            }
            guard let body = r.body else {
                guard let cache, conditional else { throw AssetPatchError(.http, "GET \(URLs.redacted(url)): HTTP 304 to an unconditional request") }
                if let kept = cache.match(r.head) {
                    log(.debug, "GET \(URLs.redacted(url)): 304 Not Modified; using the manifest fetched before")
                    return (kept.bytes, kept.finalURL)
                }
                // A 304 that does not say which of several copies it means: ask again, plainly
                // (once: a look that changes nothing keeps the copies, and would ask the same).
                log(.info, "GET \(URLs.redacted(url)): 304 without an ETag naming a kept copy; fetching the manifest")
                if !readOnly { ManifestCache.drop(from: store) }
                return try fetchManifest(state, conditional: false)
            }
            keepForRevalidation(url: url, r.head, body, cache: cache)
            if !readOnly && Validators.reusable(r.head) == nil && r.head.header("Last-Modified") != nil {
                // The copies kept stay good: their validators were not racy, so no later manifest
                // can share them. This one is not kept.
                log(.debug, "GET \(URLs.redacted(url)): Last-Modified \(r.head.header("Last-Modified")!) is not a second older than the response's Date (\(r.head.header("Date") ?? "none")); not kept for a 304")
            }
            return (body, r.head.effectiveURL)
        }
    }

    /// Fetches and judges the manifest. nil: nothing to do (`ASSETPATCH_NO_UPDATE`).
    /// Accepting it pins the package and channel and moves the downgrade mark in `state`; with
    /// keys, what the keys in force no longer vouch for stops counting (`StoreState.judge`).
    func evaluate(_ state: inout StoreState, _ e: inout Evaluation) throws -> Candidate? {
        let (bytes, finalURL) = try served ?? fetchManifest(state)
        let source = URLs.redacted(finalURL)
        e = Evaluation()
        var chain: KeyChainFollowed?
        var manifest = try Manifest.decode(bytes, source: source, verifies: config.verifies) { ref in
            let (keys, followed) = try self.signingKeys(for: ref, manifestURL: finalURL)
            chain = followed
            return keys
        }
        // An update keeps what it decoded, not the text (300 KB for a 1,000-file manifest, held
        // through the download and the install otherwise).
        manifest.payload = []
        e.offered = manifest.isLegacy ? 0 : manifest.version
        e.headRead = true
        try cancel.check()

        let archiveURL = URLs.resolve(manifest.archiveURL, against: finalURL)
        guard let archive = Location(archiveURL) else {
            throw AssetPatchError(.manifest, "\(source): archive URL \"\(URLs.redacted(archiveURL))\" has an unsupported scheme")
        }
        // A remote manifest may not make the client read local files.
        if archive.isFile && !(config.manifest?.isFile ?? false) {
            throw AssetPatchError(.manifest, "\(source): a remote manifest may not name a file:// archive")
        }

        if manifest.kind == .legacy {
            if manifest.archiveDigest == state.activeLegacyDigest || manifest.archiveDigest == state.pendingLegacyDigest {
                e.noUpdate = (.current, manifest.archiveDigest == state.activeLegacyDigest ? state.active?.version ?? 0 : state.pending?.version ?? 0)
                return nil
            }
            let version = max(state.highestInstalled, state.highestVersion, state.active?.version ?? 0) + 1
            return Candidate(manifest: manifest, archive: archive, version: version,
                             releaseID: Store.releaseID(version: version, digest: manifest.archiveDigest))
        }

        // The order matters: the signature (checked by decoding), then the package and the
        // channel, then the expiry, then the version rules. A manifest of another package or
        // channel changes nothing, and an expired one is an error even when its version is the
        // one installed (a replayed or 304-kept manifest must not hide that the publisher's
        // manifest went stale).
        let package = manifest.package ?? "default"
        let verifying = config.verifies
        if let expected = state.expectedPackage(verifying: verifying), expected.name != package {
            let who: String
            switch expected.source {
            case .option: who = "the package option names"
            case .bundle: who = "the bundle marker names"
            case .verifiedManifest, .manifest: who = "was pinned by the first manifest accepted"
            }
            throw AssetPatchError(.manifest, "\(source): package \"\(package)\" is not this client's package \"\(expected.name)\" (\(who))")
        }
        let channel = manifest.channelName
        e.channel = channel
        let verifiedBefore = verifying ? store.verifiedBefore(state) : [:]
        if let want = config.channel ?? state.expectedChannel(verifying: verifying, verifiedBefore: verifiedBefore)?.name, want != channel {
            let who = config.channel != nil ? "option channel" : "pinned by the first manifest accepted; a host moves it by setting option channel"
            throw AssetPatchError(.manifest, "\(source): a manifest of channel \"\(channel)\"; this client follows channel \"\(want)\" (\(who))")
        }
        let v = manifest.version, order = manifest.order
        let now = unixTime()
        e.expires = manifest.expires
        if let expires = manifest.expires, expires <= now {
            throw AssetPatchError(.expired, "\(source): version \(v) expired at \(RFC3339.format(expires))")
        }
        e.read = (order, nil)
        if namesHead, manifest.kind == .format1, let head = manifest.headURL, order != declined, let given = config.manifest,
           NamedHead.location(head, beside: given) != nil {
            // Judged as far as the head will be (signature, package, channel, expiry): nothing
            // is accepted from it, the head is; or, when the head fails, these bytes are.
            e.read = (order, head)
            e.naming = (bytes, finalURL)
            return nil
        }
        if let expires = manifest.expires, expires - now < ManifestJudge.expiryWarning {
            log(.warning, "\(source): version \(v) expires at \(RFC3339.format(expires)), in \((expires - now) / 3600) hours; once it has, this client refuses it until the publisher signs the channel again")
        }
        let releaseID = Store.releaseID(version: v, digest: manifest.archiveDigest)
        if verifying, let chain {
            // Accepted so far: the document followed is kept, and what was accepted before is
            // judged by the keys in force, at once (an error later must not undo it).
            let vouch = try rolloutIncludes(manifest)
                ? Vouch(releaseID: releaseID, content: manifest.contentDigest, signers: manifest.signers) : nil
            let j = Judgement(anchor: chain.anchor, document: chain.document, followed: chain.followed, vouch: vouch,
                              legacy: chain.legacy, verifiedBefore: verifiedBefore)
            e.judgement = j
            let message: String?
            if readOnly {
                message = state.judge(under: j.document.signing, vouch: j.vouch, legacy: j.legacy, verifiedBefore: verifiedBefore, now: now)
            } else {
                (message, state) = try store.commit(j)
            }
            if let message {
                log(.warning, message)
                e.trustChanged = true
            }
        }
        var accepted = state
        accepted.accept(package: package, order: order, verified: manifest.signatureVerified, signers: manifest.signers,
                        channel: channel, channelByHost: config.channel != nil)
        let mark = state.downgradeMark(verifying: verifying, channel: channel)
        e.markInForce = mark.version
        // The publisher's mirrors (repository roots), from a verified head not older than one
        // accepted before: each as this channel's head there, named as manifest_url names it.
        if verifying, manifest.signatureVerified, order >= mark, !readOnly, let location = config.manifest {
            let file = URLs.redacted(location.url).split(separator: "/").last.map(String.init) ?? "head.json"
            store.keepMirrors(manifest.mirrors.map { $0 + Channel.directory(channel) + file })
        }
        if state.bundlePackage == package && v <= state.bundleVersion {
            // The app's bundle already carries this release (or a newer one).
            state = accepted
            e.noUpdate = (.inBundle, v)
            return nil
        }
        // A verifying client compares what is offered only with what was verified: a release of
        // that version installed by a client that verifies nothing is not this one.
        func isThis(_ r: ReleaseRef?) -> Bool {
            guard let r, r.version == v else { return false }
            return !verifying || (r.verified ?? verifiedBefore[r.id] ?? false)
        }
        if (state.activeLegacyDigest == nil && isThis(state.active)) || (state.pendingLegacyDigest == nil && isThis(state.pending)) {
            state = accepted
            e.noUpdate = (.current, v)
            return nil
        }
        if state.bad.contains(v) {
            state = accepted
            e.noUpdate = (.badVersion, v)
            return nil
        }
        if order < mark {
            // Nothing older is ever installed. Not an error: every multi-tier CDN serves an older
            // manifest from some edge for up to its max-age times its tiers, and a replay gains
            // nothing. The warning says what happened; the host reads the reason.
            let what = v == mark.version
                ? "is \(order), signed before \(mark) accepted before (a copy from before a halt or a rollout change: a cache, or a replay)"
                : "is older than \(mark) accepted before (a cache still serving an old manifest, or a replay)"
            log(.warning, "\(source): version \(v) \(what); nothing to install")
            e.noUpdate = (.older, v)
            return nil
        }
        if let installed = [state.active, state.pending].compactMap({ $0 }).max(by: { $0.version < $1.version }),
           state.activeLegacyDigest == nil, v < installed.version, installed.channelName != channel {
            // Only a channel the host named gets here (the channel is pinned otherwise).
            log(.info, "moving to channel \(channel): its version \(v) replaces version \(installed.version) of channel \(installed.channelName)")
        }
        if try !isInRollout(manifest, source: source, &e) {
            // Seen, not taken: the mark rises, so a copy signed before this one is older.
            state.note(order: order, verified: manifest.signatureVerified, signers: manifest.signers, channel: channel)
            return nil
        }
        if let have = config.appVersion, !AppVersion.fits(have, min: manifest.minAppVersion, max: manifest.maxAppVersion) {
            let range = [manifest.minAppVersion.map { "\($0) or newer" }, manifest.maxAppVersion.map { "\($0) or older" }]
                .compactMap { $0 }.joined(separator: " and ")
            throw AssetPatchError(.incompatible, "\(source): version \(v) needs app version \(range), this app is \(have.map(String.init).joined(separator: "."))")
        }
        if manifest.releaseBytes > config.maxReleaseBytes {
            throw AssetPatchError(.archive, "\(source): release of \(manifest.releaseBytes) bytes exceeds max_release_bytes (\(config.maxReleaseBytes))")
        }
        state = accepted
        var c = Candidate(manifest: manifest, archive: archive, version: v, releaseID: releaseID)
        // Delta files beside the archive, under the archive's rule: a remote manifest names no local file.
        c.deltaFiles = (manifest.index?.deltas ?? []).compactMap { d in
            Location(URLs.resolve(d.url, against: finalURL)).flatMap { $0.isFile == archive.isFile ? (d, $0) : nil }
        }
        return c
    }

    /// This client's rollout id: the option's, else the data directory's (created at the first
    /// need; a look that changes nothing uses one drawn for it alone when none exists yet, and
    /// says so).
    private func rolloutID() throws -> String {
        if let id = config.rolloutID { return id }
        guard readOnly else { return try store.rolloutID() }
        if let id = store.existingRolloutID() { return id }
        log(.info, "this data directory has no rollout id yet (one is drawn at its first check): a random one stands in for this look")
        var rng = SystemRandomNumberGenerator()
        return Hex.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) })
    }

    /// Whether the manifest's rollout (if any) includes this client now.
    private func rolloutIncludes(_ manifest: Manifest) throws -> Bool {
        guard let rollout = manifest.rollout else { return true }
        let id = try rolloutID()
        let bucket = Rollout.bucket(package: manifest.package ?? "default", version: manifest.version, rolloutID: id)
        return Rollout.takes(bucket: bucket, percent: rollout.percent(at: unixTime()))
    }

    /// A staged rollout offers the release to a share of clients, each deciding by its bucket.
    private func isInRollout(_ manifest: Manifest, source: String, _ e: inout Evaluation) throws -> Bool {
        guard let rollout = manifest.rollout else { return true }
        let percent = rollout.percent(at: unixTime())
        let id = try rolloutID()
        let bucket = Rollout.bucket(package: manifest.package ?? "default", version: manifest.version, rolloutID: id)
        e.rollout = (Rollout.basisPoints(percent), bucket)
        guard Rollout.takes(bucket: bucket, percent: percent) else {
            e.noUpdate = (.notInRollout, manifest.version)
            let state = percent == 0 ? "halted (0%)" : "rolled out to \(Rollout.format(percent))% of clients"
            log(.info, "\(source): version \(manifest.version) is \(state) (rollout \(rollout.summary)); this client's bucket \(bucket) of 10000 is not among them")
            return false
        }
        return true
    }
}
