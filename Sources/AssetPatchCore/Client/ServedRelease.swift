import Glibc

/// The release one client serves: what its resolve, plugins, release info and mark_good speak
/// of, until the client itself moves on (its update with apply=immediate, rollback, reset, a
/// judgement of installed releases) or the host opens a new client. Another client's update of
/// the same data directory changes the state on disk, not what this client serves: code and
/// resources always come from one release. The lease keeps the release on disk meanwhile.
final class ServedRelease: @unchecked Sendable {  // `record` is only touched under `lock`
    let ref: ReleaseRef
    let lease: ReleaseLease
    // A plain mutex rather than a generic Locked: this object is made on update threads, and the
    // first instantiation of a generic type's metadata there races, to ThreadSanitizer's eye,
    // with another thread's inside the (uninstrumented) Swift runtime.
    private let lock = Condition()
    private var record: ReleaseRecord?
    /// The release's groups (from its group table: no record parsed at open).
    let groups: [ReleaseGroup]
    /// What fetching each absent on-demand group would transfer, as the update that installed
    /// the release planned it (read once at the open: `group_status` answers from memory).
    let fetchBytes: [String: UInt64]
    /// Shared leases on the on-demand groups this client serves files from, by name.
    private var groupLeases: [String: ReleaseLease] = [:]

    init(ref: ReleaseRef, lease: ReleaseLease, groups: [ReleaseGroup], fetchBytes: [String: UInt64] = [:]) {
        self.ref = ref
        self.lease = lease
        self.groups = groups
        self.fetchBytes = fetchBytes
    }

    /// Holds (or with nil, lets go of) the lease on group `name`.
    func hold(group name: String, _ lease: ReleaseLease?) {
        lock.locked { groupLeases[name] = lease }
    }

    /// The root index of group `name` in the release's table (its number), nil if there is none.
    func groupNumber(_ name: String) -> Int? {
        groups.firstIndex { $0.name == name }.map { $0 + 1 }
    }

    /// The release's record, read from disk when first asked, then kept (a served release never
    /// changes). Not given at the start even by an update that has it: its file list is most
    /// of it, and resolving needs only the table.
    func info(_ store: Store) throws -> ReleaseRecord {
        try lock.locked {
            if let record { return record }
            let info = try store.loadRelease(ref.id)
            record = info
            return info
        }
    }
}

extension Client {
    /// Serves `ref` (nil: the bundle only) from now on: takes its lease, indexes it, and swaps
    /// what resolving reads and what plugins and release info speak of, from the release's names
    /// file (as at an open: an update lets go of its list of the release's files first, which
    /// at 100,000 files is 15 MB more beside the two resolve tables). A release whose
    /// directory is already gone (another process cleaned it up after the state changed) is
    /// not served: the bundle is, and the next open serves the state's active release.
    func serve(_ ref: ReleaseRef?) throws {
        var next: ServedRelease?
        var index: NameTable?
        var groupNames: [String] = [], absent = Set<Int>()
        if let ref {
            if let lease = try store.lease(ref.id) {
                let groups: [ReleaseGroup]
                (index, groups) = try loadIndex(ref)
                let onDemand = groups.contains { $0.delivery == .onDemand }
                let fetchBytes = !onDemand ? [:] : store.groupFetchBytes(ref.id)
                let served = ServedRelease(ref: ref, lease: lease, groups: groups, fetchBytes: fetchBytes)
                // The on-demand groups the state lists, leased while this client serves them.
                if onDemand {
                    let local = try store.loadState().groups.local[ref.id] ?? []
                    groupNames = [""] + groups.map { $0.delivery == .onDemand ? $0.name : "" }
                    for (i, g) in groups.enumerated() where g.delivery == .onDemand {
                        if local.contains(g.name), let l = try store.groupLease(ref.id, g.name) {
                            served.hold(group: g.name, l)
                        } else {
                            absent.insert(i + 1)
                        }
                    }
                }
                // Files of absent groups whose bundle copy has their sha256 (checked at the
                // update, the fingerprint now): the bundle serves them, as local as any.
                if let bundleDir, !absent.isEmpty {
                    let copies = store.bundleCopies(ref.id)
                    let same = copies.isEmpty ? [] : BundleDigests(bundleDir: bundleDir, cachePath: store.bundleDigestsPath).verified(copies)
                    if !same.isEmpty {
                        index = try loadIndex(ref, excluding: same).0
                    }
                }
                next = served
            } else {
                log(.warning, "version \(ref.version) is gone from \(store.root) (another client cleaned it up); serving the bundle")
            }
        }
        let version = next?.ref.version ?? 0
        let previous = served.withLock { s -> ServedRelease? in
            defer { s = next }
            return s
        }
        // The previous release's lease is let go only once no resolve can still return its paths.
        withExtendedLifetime(previous) {
            view.replace { $0.with(release: .some(index), activeVersion: version, groups: (groupNames, absent)) }
        }
    }

    /// The release this client serves, nil for the bundle only.
    var servedRelease: ServedRelease? { served.withLock { $0 } }
}
