import Glibc

/// What `assetpatch_group_status` reports of one group of the release a client serves.
package struct GroupStatus: Sendable, Equatable {
    package enum State: Int32, Sendable { case absent = 0, partial = 1, local = 2 }
    package var name: String
    package var state: State
    package var delivery: ReleaseGroup.Delivery
    package var pinned: Bool
    package var files: Int
    /// Unpacked bytes of its files, and of those on disk.
    package var totalBytes: UInt64
    package var localBytes: UInt64
    /// Its files' bytes in the archive.
    package var archiveBytes: UInt64
    /// What a fetch would transfer (0 when local): its files not found on disk, by range, as the
    /// update that installed the release planned it; a chunked file counts whole.
    package var fetchBytes: UInt64
}

/// Content on demand: the groups of the release a client serves, asked about from memory,
/// fetched from that release's own archive, evicted, pinned, held to a quota.
extension Client {
    /// The groups of the release this client serves, in the release's order.
    package var groupNames: [String] { servedRelease?.groups.map(\.name) ?? [] }

    /// A group's state from memory: no system call, no lock but the view's read.
    package func groupStatus(_ name: String) throws(AssetPatchError) -> GroupStatus {
        guard let served = servedRelease, let n = served.groupNumber(name) else {
            throw AssetPatchError(.notFound, "no group \"\(name)\" in the release this client serves")
        }
        let g = served.groups[n - 1]
        let local = g.delivery == .install || view.read { $0.isLocal(group: name) }
        let partial = !local && groupProgress.withLock { $0[name] != nil }
        return GroupStatus(name: name, state: local ? .local : partial ? .partial : .absent, delivery: g.delivery,
                           pinned: groupPins.withLock { $0.contains(name) }, files: g.files, totalBytes: g.size,
                           localBytes: local ? g.size : 0, archiveBytes: g.storedBytes,
                           fetchBytes: local ? 0 : served.fetchBytes[name] ?? g.storedBytes)
    }

    /// Fetches the on-demand groups `names` of the release this client serves (install groups
    /// are always there), one after the other; returns the bytes transferred. A group another
    /// process fetched is taken as it is. With `group_quota_bytes`, unpinned groups are evicted
    /// first, least recently used first; `.quota` when pinned and wanted groups leave no room.
    @discardableResult
    /// `cancel`: a token of the caller's that stops this fetch alone (`cancel()` stops every one).
    package func fetchGroups(_ names: [String], progress: ProgressHandler?, cancel: CancelToken? = nil) throws -> UInt64 {
        try loggingFailure {
            guard let served = servedRelease else { throw AssetPatchError(.notFound, "no release is served: the bundle has no groups") }
            var wanted: [String] = []
            for name in names where !wanted.contains(name) {
                guard served.groupNumber(name) != nil else {
                    throw AssetPatchError(.notFound, "no group \"\(name)\" in version \(served.ref.version)")
                }
                wanted.append(name)
            }
            let token = cancel ?? CancelToken()
            groupCancels.withLock { $0.append(token) }
            defer { groupCancels.withLock { $0.removeAll { $0 === token } } }
            var config = configuration
            config.http.background = !config.fetchForeground
            return try fetchGroups(wanted, served, config, progress, token)
        }
    }

    /// Fetches `wanted` (groups of `served`) one after the other with `config`'s priority.
    private func fetchGroups(_ wanted: [String], _ served: ServedRelease, _ config: ClientConfig, _ progress: ProgressHandler?,
                             _ token: CancelToken) throws -> UInt64 {
        var moved: UInt64 = 0
        for name in wanted {
            let number = served.groupNumber(name)!
            let group = served.groups[number - 1]
            guard group.delivery == .onDemand else { continue }
            // The bytes a fetch has so far make the group partial for `groupStatus`.
            let updater = Updater(store: store, config: config, bundleDir: bundleDir, cancel: token, progress: { [weak self] p in
                if p.phase == .download, p.bytesDone > 0 { self?.groupProgress.withLock { $0[name] = p.bytesDone } }
                return progress?(p) ?? false
            }) { [weak self] level, message in
                self?.log(level, message)
            }
            let began = monotonicMillis()
            func event(_ status: Status, _ bytes: UInt64) {
                emit(OutcomeEvent(.groupFetch, version: served.ref.version, channel: served.ref.channelName, [
                    ("group", .string(name)), ("result", .string(status.eventCode)), ("bytes", .number(String(bytes))),
                    ("duration_ms", .int(Int64(monotonicMillis() - began))),
                ]))
            }
            do {
                let bytes = try fetchGroup(group, number: UInt16(number), served, updater, token)
                event(.ok, bytes)
                moved += bytes
            } catch let e as AssetPatchError {
                event(e.status, groupProgress.withLock { $0[name] } ?? 0)
                throw e
            }
        }
        return moved
    }

    private func fetchGroup(_ group: ReleaseGroup, number: UInt16, _ served: ServedRelease, _ updater: Updater, _ token: CancelToken) throws -> UInt64 {
        let id = served.ref.id
        if view.read({ $0.isLocal(group: group.name) }) {
            // On disk and served (this client holds its lease): listed again should another
            // client have evicted it meanwhile, used now, and the quota kept.
            try markLocal(group.name, number: number, served)
            try makeRoom(besides: group, served)
            return 0
        }
        guard let lock = try store.lockGroupFetch(id, group.name, cancel: token) else {
            throw AssetPatchError(.internal, "the fetch lock of group \(group.name) was not taken")
        }
        defer { _ = lock }
        groupProgress.withLock { $0[group.name] = 0 }
        defer { groupProgress.withLock { $0[group.name] = nil } }
        let done = { [store] in
            try? FS.removeTree(store.groupDownload(id, group.name))
            try? FS.unlink(store.groupDownload(id, group.name) + ".lock")  // under the lock: see `lockGroupFetch`
        }
        // On disk already (another process's fetch, or kept for a client that served it after
        // an eviction): listed and served as it is.
        if FS.isDirectory(store.groupDir(id, group.name)), let lease = try store.groupLease(id, group.name) {
            served.hold(group: group.name, lease)
            try markLocal(group.name, number: number, served)
            done()
            try makeRoom(besides: group, served)
            return 0
        }
        guard group.size <= configuration.maxReleaseBytes else {
            throw AssetPatchError(.archive, "group \(group.name) of \(group.size) bytes exceeds max_release_bytes (\(configuration.maxReleaseBytes))")
        }
        // Listed but gone from disk (an open that could not clean up): unlisted first, so that
        // its own files are not offered as where to link them from.
        var state = try store.loadState()
        if state.groups.isLocal(group.name, in: id) {
            (_, state) = try store.modifyState { $0.groups.setLocal(group.name, in: id, false) }
        }
        try checkFits(group, served, state)
        let target = GroupFetchTarget(releaseID: id, record: try served.info(store), group: group, number: number)
        // Foreground from here only, with the group's fetch lock held: a background fetch of the
        // same group holding that lock must not wait behind this one's foreground work.
        let fetch = { try updater.fetchGroup(target, state) { served.hold(group: group.name, $0) } }
        let moved = try updater.config.fetchForeground ? transfers.foreground(fetch) : fetch()
        try markLocal(group.name, number: number, served)
        done()
        // The quota is held once the group is on disk: a fetch that fails evicts nothing.
        try makeRoom(besides: group, served)
        return moved
    }

    /// Lists the group in the state as on disk and used now, and serves it.
    private func markLocal(_ name: String, number: UInt16, _ served: ServedRelease) throws {
        try store.modifyState { s in
            s.groups.setLocal(name, in: served.ref.id, true)
            s.groups.touch(name)
        }
        setAbsent(number, false, served)
    }

    /// Marks root `number` of the served release's table as (not) on disk in the view, if the
    /// client still serves that release.
    private func setAbsent(_ number: UInt16, _ absent: Bool, _ served: ServedRelease) {
        view.replace { v in
            guard servedRelease === served else { return v }
            var set = Set(v.groupNames.indices.filter { !v.isLocal(group: v.groupNames[$0]) && !v.groupNames[$0].isEmpty })
            if absent { set.insert(Int(number)) } else { set.remove(Int(number)) }
            return v.with(absent: set)
        }
    }

    /// Evicts on-demand group `name` of the served release: the state stops listing it, this
    /// client stops serving it (resolve gives `.notLocal`), and its directory is deleted unless
    /// another client serves files from it (then at a clean-up after that client closes).
    package func evictGroup(_ name: String) throws {
        try loggingFailure {
            guard let served = servedRelease, let number = served.groupNumber(name) else {
                throw AssetPatchError(.notFound, "no group \"\(name)\" in the release this client serves")
            }
            guard served.groups[number - 1].delivery == .onDemand else {
                throw AssetPatchError(.argument, "group \(name) is installed with every update: it can't be evicted")
            }
            // After a fetch of the group under way (this process's or another's) is done.
            let token = CancelToken()
            groupCancels.withLock { $0.append(token) }
            defer { groupCancels.withLock { $0.removeAll { $0 === token } } }
            let lock = try store.lockGroupFetch(served.ref.id, name, cancel: token)
            defer { _ = lock }
            try evict(name, number: UInt16(number), served)
        }
    }

    /// Evicts a group whose fetch lock the caller holds.
    private func evict(_ name: String, number: UInt16, _ served: ServedRelease) throws {
        try store.modifyState { $0.groups.setLocal(name, in: served.ref.id, false) }
        setAbsent(number, true, served)
        served.hold(group: name, nil)
        if try !store.removeGroup(served.ref.id, name) {
            log(.info, "group \(name) stays on disk while another client serves it; it goes at a clean-up after that client closes")
        }
    }

    /// Pins (or unpins) group `name`: a pinned group is never evicted to make room under the quota.
    package func pinGroup(_ name: String, _ on: Bool) throws {
        try loggingFailure {
            guard servedRelease?.groupNumber(name) != nil else {
                throw AssetPatchError(.notFound, "no group \"\(name)\" in the release this client serves")
            }
            let (_, state) = try store.modifyState { $0.groups.pin(name, on) }
            groupPins.withLock { $0 = Set(state.groups.pinned) }
        }
    }

    /// The groups listed on disk in the served release besides `group`, what of them the quota
    /// must keep (pinned, or wanted with every update), and their bytes with `group`'s.
    private func quotaView(_ group: ReleaseGroup, _ served: ServedRelease, _ state: StoreState)
        -> (local: [ReleaseGroup], kept: Set<String>, bytes: ([ReleaseGroup]) -> UInt64) {
        let kept = Set(state.groups.pinned).union(configuration.groups)
        let local = served.groups.filter { $0.delivery == .onDemand && $0.name != group.name && state.groups.isLocal($0.name, in: served.ref.id) }
        let bytes = { (groups: [ReleaseGroup]) in
            groups.reduce(group.size) { total, g in total.addingReportingOverflow(g.size).overflow ? .max : total + g.size }
        }
        return (local, kept, bytes)
    }

    /// `.quota` before any byte is fetched when `group` can't fit `group_quota_bytes` beside
    /// the groups that can't be evicted (pinned, or wanted with every update).
    private func checkFits(_ group: ReleaseGroup, _ served: ServedRelease, _ state: StoreState) throws {
        guard let quota = configuration.groupQuotaBytes else { return }
        let (local, kept, bytes) = quotaView(group, served, state)
        let staying = bytes(local.filter { kept.contains($0.name) })
        if staying > quota {
            throw AssetPatchError(.quota, "group \(group.name) (\(group.size) bytes) does not fit group_quota_bytes \(quota): pinned groups and those the groups option wants hold \(staying - group.size) bytes")
        }
    }

    /// Evicts groups neither pinned nor wanted with every update, least recently used first
    /// (one being fetched is skipped), until the groups on disk with `group` fit
    /// `group_quota_bytes`; `group` was just fetched or used.
    private func makeRoom(besides group: ReleaseGroup, _ served: ServedRelease) throws {
        guard let quota = configuration.groupQuotaBytes else { return }
        let state = try store.loadState()
        let (local, kept, bytes) = quotaView(group, served, state)
        var on = local
        // Never used first, then in the order of their last use.
        let order = { (g: ReleaseGroup) in state.groups.used.firstIndex(of: g.name) ?? -1 }
        for victim in local.filter({ !kept.contains($0.name) }).sorted(by: { order($0) < order($1) }) where bytes(on) > quota {
            guard let lock = try store.lockGroupFetch(served.ref.id, victim.name, cancel: nil) else { continue }
            defer { _ = lock }
            log(.info, "evicting group \(victim.name) (\(victim.size) bytes) to keep group_quota_bytes \(quota) with group \(group.name)")
            try evict(victim.name, number: UInt16(served.groupNumber(victim.name)!), served)
            on.removeAll { $0.name == victim.name }
        }
    }
}
