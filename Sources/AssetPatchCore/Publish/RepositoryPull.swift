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
        /// Releases of the history taken from the bucket that no checked head names.
        package var unchecked: [Int64] = []
    }

    static let limit = 256 << 20

    /// `trusted`: public keys one of which must have signed every head and every release of
    /// the history taken from the bucket (the command's own keys, and older ones given; none:
    /// an empty bucket only); nil takes the bucket's as they are (`pull` without keys, a
    /// command that signs no head), `trustBucket` too and vouches for the history (clearing
    /// what earlier pulls marked unchecked).
    package static func pull(from store: ObjectStore, into repo: String, trusted: [[UInt8]]?, trustBucket: Bool = false) throws -> Outcome {
        var out = Outcome()
        func listed() throws -> [String] {
            try store.list().map(\.key).filter { RepositoryPush.isPublished($0) && !$0.hasPrefix("archives/") && !$0.hasPrefix("deltas/") }.sorted()
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
                continue
            }
            if ours == theirs { record[key] = etag; continue }
            guard let t = RepositoryPush.fields(theirs), let o = RepositoryPush.fields(ours) else {
                throw AssetPatchError(.manifest, "\(key): a head this tool can't read (in \(store.location.shown) or \(repo))")
            }
            if (o.version, o.revision) < (t.version, t.revision) {
                writes.append((key, theirs))
                record[key] = etag
            } else if (o.version, o.revision) > (t.version, t.revision) {
                out.ahead.append(key)
            } else {
                throw AssetPatchError(.state, "\(key): version \(t.version) revision \(t.revision) in \(store.location.shown) and in \(repo) differ: two publishers signed it; nothing changed")
            }
        }
        // What changes in place: the bucket's and the copy's merged (HistoryMerge).
        for key in keys.filter(RepositoryPush.isMutable) {
            guard let theirs = fetched[key]?.body else { continue }
            guard let ours = try local(repo, key) else { writes.append((key, theirs)); continue }
            guard let merged = HistoryMerge.merge(key, ours: ours, theirs: theirs) else {
                throw AssetPatchError(.state, "\(key) in \(store.location.shown) can't be merged with \(repo)'s; nothing changed")
            }
            if merged != ours { writes.append((key, merged)) }
        }
        // What is signed again here must be the publisher's: every head of the copy as it
        // will be (taken from the bucket or its own) must be signed by a key given, for the
        // channel its path names, or nothing is written. The history keeps no signatures: a
        // release of it must describe what a checked head of that version describes (its
        // payload but for the signing's fields), and any other is marked unchecked, refused by
        // the commands that sign a release from the history (`ChannelManifests.history`). The
        // marks are worked out anew at every checked pull.
        var unchecked: Set<Int64>?
        if let trusted {
            let pending = Dictionary(writes, uniquingKeysWith: { $1 })
            func final(_ key: String) throws -> [UInt8]? { try pending[key] ?? local(repo, key) }
            let all = Set(keys + ((try? FS.walkFiles(repo)) ?? []))
            var described = Set<String>()  // "version name digest" of every checked head
            let heads = all.filter(RepositoryPush.isHead)
            for key in heads.sorted() {
                guard let bytes = try final(key) else { continue }
                guard !trusted.isEmpty else {
                    throw AssetPatchError(.argument, "\(key) would be signed again unchecked: give the keys that signed the bucket's heads (--key, --trust-key), or --trust-bucket for a repository nobody signs")
                }
                let m: Manifest
                do { m = try Manifest.decode(bytes, trustedKeys: trusted, source: key) } catch let e as AssetPatchError {
                    throw AssetPatchError(.signature, "\(e.message): not signed by a key this command trusts (its --key, or --trust-key); nothing changed")
                }
                let parts = key.split(separator: "/")
                let channel = parts.count == 3 ? String(parts[1]) : Channel.defaultName
                guard m.channelName == channel else {
                    throw AssetPatchError(.signature, "\(key) is signed for channel \"\(m.channelName)\", not \"\(channel)\": moved there by someone else? nothing changed")
                }
                described.insert("\(m.version) \(parts.last ?? "") \(m.contentDigest)")
            }
            var marks = Set<Int64>()
            for key in all.filter(RepositoryPush.isHistoryRelease).sorted() {
                let parts = key.split(separator: "/")
                guard parts.count == 3, let version = Int64(parts[1]) else { continue }
                let json = try final(key).flatMap { try? JSONParser.parse($0) }
                if !described.contains("\(version) \(parts[2]) \(json.map(Manifest.contentDigest) ?? "")") { marks.insert(version) }
            }
            unchecked = marks
        } else if !trustBucket {
            // Nothing checked: what came from the bucket's history is unchecked.
            unchecked = ChannelManifests.unchecked(repo: repo).union(writes.compactMap { key, _ in
                key.hasPrefix("history/") && !RepositoryPush.isMutable(key) ? Int64(key.split(separator: "/")[1]) : nil
            })
        }
        for (key, bytes) in writes {
            try FS.makeDirectories(FS.parent(of: repo + "/" + key))
            try FS.writeAtomically(repo + "/" + key, bytes)
            out.downloaded.append(key)
            out.bytes += UInt64(bytes.count)
        }
        try FS.makeDirectories(repo)
        try RepositoryPush.saveRecord(repo: repo, store: store, record)
        // --trust-bucket vouches for everything.
        let marked = unchecked ?? []
        try ChannelManifests.markUnchecked(repo: repo, marked)
        out.unchecked = marked.sorted()
        return out
    }

    static func local(_ repo: String, _ key: String) throws -> [UInt8]? {
        FS.exists(repo + "/" + key) ? try FS.readFile(repo + "/" + key, limit: limit) : nil
    }
}
