import Glibc

/// What the host declares about itself (its package, its keys, its app version) and what no
/// longer fits it.
extension Client {
    /// Stops serving installed releases built for other app versions (their min_app_version /
    /// max_app_version): the active one gives way to the newest kept release that fits, or to
    /// the bundle. Runs when the app sets `app_version`, right after its open.
    func judgeInstalledReleases(appVersion app: [UInt64]) throws {
        let current = try store.loadState()
        var fits: [String: Bool] = [:]
        for ref in [current.active, current.pending].compactMap({ $0 }) + current.kept {
            guard let info = try? store.loadRelease(ref.id, listingFiles: false) else { continue }
            fits[ref.id] = AppVersion.fits(app, min: info.minAppVersion, max: info.maxAppVersion)
        }
        guard fits.values.contains(false) else { return }
        let shown = app.map(String.init).joined(separator: ".")
        let (message, state) = try store.modifyState { s in
            (s.active, s.supersede(keeping: { fits[$0.id] ?? true }, reason: "app version \(shown) is outside the release's app versions", now: unixTime()))
        }
        emitLeft(message.0, state, .incompatible)
        if let message = message.1 {
            try serve(state.active)
            log(.warning, message)
        }
    }

    /// The host names its package (the `package` option): it is pinned, and a different package
    /// pinned before gives way with its marks and releases (`StoreState.pin`).
    func pinPackage(_ name: String) throws {
        let (message, state) = try store.modifyState { s in (s.active, s.pin(name, by: .option, now: unixTime())) }
        emitLeft(message.0, state, .package)
        if let message = message.1 {
            try serve(state.active)
            log(.warning, message)
        }
    }

    /// With keys set (`public_keys` or `key_document`), a release installed without signature
    /// verification is not served: the newest kept release that was verified is, or the bundle.
    /// Its plugins never loaded (unless allow_unsigned_plugins), and its version stops counting
    /// as installed, so the genuine signed release of that version installs. (Which keys vouch
    /// for what is judged when a manifest is: only then is the newest key document known.)
    func judgeUnverifiedReleases() throws {
        guard configuration.verifies else { return }
        let current = try store.loadState()
        let before = store.verifiedBefore(current)
        let (message, state) = try store.modifyState { s in
            (s.active, s.supersede(keeping: { $0.verified ?? before[$0.id] ?? false },
                                   reason: "keys are set and it was installed without a verified signature", now: unixTime()))
        }
        emitLeft(message.0, state, .untrusted)
        if let message = message.1 {
            try serve(state.active)
            log(.warning, message)
        }
    }

    /// After an update or check judged the state by the keys in force: a release this client
    /// serves that no longer counts is served no longer.
    func serveJudged() throws {
        let state = try store.loadState()
        guard let mine = servedRelease?.ref, !state.liveReleaseIDs.contains(mine.id) else { return }
        try serve(state.active)
    }

    /// A state written before 0.4 does not say which of its marks came from verified manifests.
    /// Worked out once, from what the installed releases' records say: the verified mark is the
    /// highest verified release installed, and the pin counts as verified when such a release
    /// exists (0.3 pinned the first manifest it accepted, signed whenever keys were set).
    func migrateTrust() throws {
        let current = try store.loadState()
        guard current.highestVerifiedVersion == nil else { return }
        var highest: Int64 = 0
        for ref in [current.active, current.pending].compactMap({ $0 }) + current.kept {
            if (try? store.loadRelease(ref.id, listingFiles: false))?.signatureVerified == true { highest = max(highest, ref.version) }
        }
        try store.modifyState { s in
            guard s.highestVerifiedVersion == nil else { return }
            s.highestVerifiedVersion = highest
            if var mark = s.channelMarks[Channel.defaultName], mark.highestVerified == nil {
                mark.highestVerified = ManifestOrder(version: highest)
                s.channelMarks[Channel.defaultName] = mark
            }
            if highest > 0, let pin = s.pin, pin.source == .manifest { s.pin = PackagePin(name: pin.name, source: .verifiedManifest) }
        }
    }
}

extension Client {
    /// The key document manifests are judged by now, for this client's trust anchor: the newest
    /// followed and kept, else the pinned document (version 0: the pinned `public_keys`); nil
    /// when the client verifies nothing.
    package var keyDocumentInForce: KeyDocument? {
        guard let anchor = configuration.trustAnchor else { return nil }
        if let kept = store.keptKeyDocument(anchor: anchor), kept.version > anchor.version { return kept }
        return anchor
    }
}
