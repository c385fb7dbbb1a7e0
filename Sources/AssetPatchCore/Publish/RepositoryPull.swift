import Glibc

/// A bucket's repository brought into a local working copy, for a command that writes a
/// repository to work on (`--repo s3://...`, `assetpatch pull`): every head, the history and
/// the key documents; never the archives (no command that writes a repository reads them, and
/// the push that follows checks the bucket has what the heads name).
///
/// A working copy already there is brought up to the bucket, never back: objects written once
/// are added where missing and must match where present; a head is taken where the copy's is
/// older (version, then revision) or missing, and kept where the copy's is newer (a publish not
/// pushed yet: the next push decides). The same version and revision with other bytes, or
/// another version N, is two publishers' work: refused, nothing of the copy changed.
package enum RepositoryPull {
    package struct Outcome {
        package var downloaded: [String] = []
        /// Heads the working copy holds newer than the bucket's (not pushed yet).
        package var ahead: [String] = []
        package var bytes: UInt64 = 0
    }

    static let limit = 256 << 20

    package static func pull(from store: ObjectStore, into repo: String) throws -> Outcome {
        var out = Outcome()
        func listed() throws -> [String] {
            try store.list().map(\.key).filter { RepositoryPush.isPublished($0) && !$0.hasPrefix("archives/") }.sorted()
        }
        // The heads first, then the rest listed again: a push writes the history before the
        // heads, so what the heads read name is in the second listing, even mid-push.
        var fetched: [String: (body: [UInt8], etag: String?)] = [:]
        for key in try listed() where RepositoryPush.isHead(key) {
            guard let got = try store.get(key, limit: limit) else { continue }  // deleted meanwhile
            fetched[key] = got
        }
        let keys = try listed()
        for key in keys where !RepositoryPush.isHead(key) {
            guard let got = try store.get(key, limit: limit) else { continue }
            fetched[key] = got
        }
        // Everything is judged before anything is written: a refusal leaves the copy as it was.
        var writes: [(String, [UInt8])] = []
        var takenHead = false
        for key in keys.filter({ RepositoryPush.isWriteOnce($0) }) {
            guard let theirs = fetched[key]?.body else { continue }
            guard let ours = try local(repo, key) else { writes.append((key, theirs)); continue }
            if ours != theirs {
                throw AssetPatchError(.state, "\(key) differs between \(store.location.shown) and \(repo): another publisher's \(RepositoryPush.what(key)) is there; nothing changed")
            }
        }
        var record = RepositoryPush.loadRecord(repo: repo, store: store)
        for key in keys.filter(RepositoryPush.isHead) {
            guard let (theirs, etag) = fetched[key] else { continue }
            guard let ours = try local(repo, key) else {
                writes.append((key, theirs))
                record[key] = etag
                takenHead = true
                continue
            }
            if ours == theirs { record[key] = etag; continue }
            guard let t = RepositoryPush.fields(theirs), let o = RepositoryPush.fields(ours) else {
                throw AssetPatchError(.manifest, "\(key): a head this tool can't read (in \(store.location.shown) or \(repo))")
            }
            if (o.version, o.revision) < (t.version, t.revision) {
                writes.append((key, theirs))
                record[key] = etag
                takenHead = true
            } else if (o.version, o.revision) > (t.version, t.revision) {
                out.ahead.append(key)
            } else {
                throw AssetPatchError(.state, "\(key): version \(t.version) revision \(t.revision) in \(store.location.shown) and in \(repo) differ: two publishers signed it; nothing changed")
            }
        }
        // What changes in place follows the bucket's heads, unless the copy's holds more.
        for key in keys.filter(RepositoryPush.isMutable) {
            guard let theirs = fetched[key]?.body else { continue }
            let ours = try local(repo, key)
            if let ours, ours == theirs { continue }
            if let ours, ours.count > theirs.count, Array(ours.prefix(theirs.count)) == theirs { continue }  // an appended log, ahead
            if ours == nil || takenHead { writes.append((key, theirs)) }
        }
        for (key, bytes) in writes {
            try FS.makeDirectories(FS.parent(of: repo + "/" + key))
            try FS.writeAtomically(repo + "/" + key, bytes)
            out.downloaded.append(key)
            out.bytes += UInt64(bytes.count)
        }
        try FS.makeDirectories(repo)
        try RepositoryPush.saveRecord(repo: repo, store: store, record)
        return out
    }

    static func local(_ repo: String, _ key: String) throws -> [UInt8]? {
        FS.exists(repo + "/" + key) ? try FS.readFile(repo + "/" + key, limit: limit) : nil
    }
}
