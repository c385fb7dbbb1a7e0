import Glibc

/// The release lifecycle as the host drives it: confirm, roll back, reset, and what the state says.
extension Client {
    /// Confirms the release this client serves: it is no longer counted towards
    /// `max_failed_launches` and will not be rolled back automatically. `.state` when only the
    /// bundle is served, or when the release served is no longer installed (another client
    /// removed it: this one serves it until it closes, but it can't be confirmed any more).
    package func markGood() throws {
        try loggingFailure {
            guard let mine = servedRelease?.ref else { throw AssetPatchError(.state, "nothing to mark good: only the bundle is served") }
            let (first, state) = try store.modifyState { s -> Bool in
                guard s.liveReleaseIDs.contains(mine.id) else {
                    throw AssetPatchError(.state, "version \(mine.version), which this client serves, is no longer installed (another client replaced it); reopen the client")
                }
                let first = !s.good.contains(mine.id)
                if first { s.good.append(mine.id) }
                // The launch count is the active release's: only its confirmation ends it.
                if s.active?.id == mine.id { s.launches = 0 }
                return first
            }
            if first { emit(OutcomeEvent(.markedGood, version: mine.version, channel: mine.channelName), state: state) }
        }
    }

    /// Goes back one kept release (or to the bundle) and serves it at once; the version rolled
    /// back from is skipped by updates until a newer one is published. Its files stay on disk
    /// until the next open, so paths already handed out from it keep working this session.
    /// Returns the version now active (0: the bundle). `.state` when only the bundle is served.
    @discardableResult
    package func rollback(reason: String = "rolled back by the app") throws -> Int64 {
        try loggingFailure {
            let (from, state) = try store.modifyState { s -> ReleaseRef? in
                let from = s.active
                try s.rollBack(reason: reason, now: unixTime())
                return from
            }
            if let from {
                emit(OutcomeEvent(.rollback, version: from.version, channel: from.channelName,
                                  [("cause", .string(OutcomeEvent.RollbackCause.host.rawValue)), ("to", .int(state.active?.version ?? 0))]),
                     state: state)
            }
            try serve(state.active)
            log(.warning, "rolled back to \(state.active.map { "version \($0.version)" } ?? "the bundle"): \(reason)")
            return state.active?.version ?? 0
        }
    }

    /// Drops every release, partial download and fetched file and the bad-version list, and
    /// serves the bundle only. The downgrade mark and the pinned package stay (a reset must not
    /// let an older manifest back in). `.busy` while an update runs on this data directory.
    package func reset() throws {
        try loggingFailure {
            guard !updating.load(ordering: .acquiring), let lock = try store.tryLock() else {
                throw AssetPatchError(.busy, "an update is running on \(store.root)")
            }
            defer { _ = lock }
            let (_, state) = try store.modifyState { s in
                s.active = nil
                s.kept = []
                s.pending = nil
                s.bad = []
                s.good = []
                s.launches = 0
                s.activeLegacyDigest = nil
                s.pendingLegacyDigest = nil
            }
            try serve(nil)
            try store.recover(state)
            store.discardDownloads()
            try store.dropSpare()
            log(.info, "reset: serving the bundle only")
        }
    }

    /// The release this client serves, the data directory's pending release (from its record),
    /// or the candidate the last check found.
    /// nil when there is none.
    package func release(_ which: WhichRelease) throws -> ReleaseSummary? {
        if which == .candidate { return lastCandidate.withLock { $0 } }
        let state = try store.loadState()
        // The active release is the one this client serves (see `ServedRelease`).
        let served = servedRelease
        guard let ref = which == .active ? served?.ref : state.pending else { return nil }
        let info = try which == .active ? served!.info(store) : store.loadRelease(ref.id)
        var summary = ReleaseSummary(version: ref.version, created: info.created, label: info.label, notes: info.notes,
                                     mandatory: info.mandatory, signatureVerified: info.signatureVerified,
                                     markedGood: state.good.contains(ref.id))
        summary.channel = ref.channelName
        summary.rolloutBasisPoints = info.rolloutBasisPoints
        return summary
    }

    /// What the state says about the lifecycle now (read fresh from the data directory).
    package func lifecycle() throws -> LifecycleSummary { LifecycleSummary(try state()) }

    /// The data directory's whole state, read fresh.
    package func state() throws -> StoreState { try store.loadState() }

}
