import Glibc

extension Store {
    /// Whether release `id` is on disk as installed: its files' directory and a record that
    /// reads. The library makes both durable before any state names the release; a file system
    /// that loses them anyway (a power cut on one that does not keep what was fsync'ed, a disk
    /// that lies about flushes, a user deleting files) leaves a state naming what is gone. Two
    /// stats, no read: every open asks, and a record is parsed only when something needs it.
    func isIntact(_ id: String) -> Bool {
        FS.isDirectory(filesDir(id)) && (FS.fileSize(releaseRecordPath(id)) ?? 0) > 0
    }

    /// Under the update lock, at open: a release the state names that is no longer intact
    /// stops being served, pending or kept. The newest intact kept release is served instead
    /// (or the bundle); nothing is marked bad, so an update installs the lost version again.
    /// `state`: the state as the caller last read it (a first look, without the state lock).
    /// Returns the message for the log, if anything was dropped.
    func dropLostReleases(_ state: StoreState) throws -> String? {
        let named = { (s: StoreState) in [s.active, s.pending].compactMap { $0 } + s.kept }
        guard named(state).contains(where: { !isIntact($0.id) }) else { return nil }
        let (message, _) = try modifyState { s -> String? in
            let lost = named(s).filter { !isIntact($0.id) }
            guard !lost.isEmpty else { return nil }
            let versions = lost.map { "version \($0.version)" }.joined(separator: ", ")
            let reason = "\(versions) lost from \(root) (its files or its record are gone)"
            let ids = Set(lost.map(\.id))
            let switched = s.supersede(keeping: { !ids.contains($0.id) }, reason: reason, now: unixTime())
            return switched ?? reason + "; no longer kept"
        }
        return message
    }
}
