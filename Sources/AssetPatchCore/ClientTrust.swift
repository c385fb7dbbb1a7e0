import Glibc

/// What the host declares about itself (its app version) and what no longer fits it.
extension Client {
    /// Stops serving installed releases built for other app versions (their min_app_version /
    /// max_app_version): the active one gives way to the newest kept release that fits, or to
    /// the bundle. Runs when the app sets `app_version`, right after its open.
    func judgeInstalledReleases(appVersion app: [UInt64]) throws {
        let current = try store.loadState()
        var fits: [String: Bool] = [:]
        for ref in [current.active, current.pending].compactMap({ $0 }) + current.kept {
            guard let info = try? store.loadRelease(ref.id) else { continue }
            fits[ref.id] = AppVersion.fits(app, min: info.minAppVersion, max: info.maxAppVersion)
        }
        guard fits.values.contains(false) else { return }
        let shown = app.map(String.init).joined(separator: ".")
        let (message, state) = try store.modifyState { s in
            s.supersede(keeping: { fits[$0.id] ?? true }, reason: "app version \(shown) is outside the release's app versions", now: unixTime())
        }
        if let message {
            try serve(state.active)
            log(2, message)
        }
    }
}
