import Glibc

/// A repository written to a bucket in the order clients can live with (`assetpatch push`):
///
/// 1. Objects written once: archives, key documents, the history's releases. Each is skipped
///    when the bucket has the same bytes, sent with its MD5 (`Content-MD5`: the store refuses
///    other bytes) and its sha256 (signed, and kept as metadata), and read back. Key documents
///    and the history's releases are created only (`If-None-Match: *`): another publisher's
///    version N is a conflict, never replaced.
/// 2. The files that change (the history's offer lists, the signing log).
/// 3. The heads last (`head.json` then `manifest.json`, per channel), read once at the start
///    and sent as read. Before each, everything it names must be in the bucket. Each is
///    written only if the bucket still holds a head this repository made: the one it last
///    pushed (its ETag, kept in `.assetpatch-remote.json`), or one whose version and archive
///    its history holds at a revision not above its own. A publisher whose repository is
///    behind the bucket's, or racing another, fails, naming the version there.
///
/// Only what clients read is uploaded (heads, channels' heads, archives, key documents, the
/// history); anything else in the directory (a private key, `.git`, temporaries) is left out
/// and listed.
package enum RepositoryPush {
    package struct Outcome {
        package var uploaded: [String] = []
        package var skipped = 0
        package var bytes: UInt64 = 0
        package var heads: [String] = []
        /// Files in the directory that are no part of a repository, not uploaded.
        package var leftOut: [String] = []
        /// The store ignored a conditional write (probed): a lock object was taken instead, and
        /// heads were compared by a read just before their write.
        package var conditionalWrites = true
        /// Objects put in parts, their parts, and the parts a killed push had left and were kept.
        package var multipart = 0
        package var parts = 0
        package var partsResumed = 0
        /// Heads this repository did not change since it last pushed or pulled them, which
        /// another publisher has changed in the bucket since: left as the bucket holds them.
        package var leftAlone: [String] = []
    }

    /// The local record of what this repository last pushed: the heads' ETags per bucket.
    static let recordName = ".assetpatch-remote.json"

    package static func isHead(_ path: String) -> Bool {
        let parts = path.split(separator: "/")
        let name = parts.last.map(String.init) ?? ""
        guard name == "manifest.json" || name == "head.json" else { return false }
        return parts.count == 1 || (parts.count == 3 && parts[0] == "channels" && Channel.isValid(String(parts[1])))
    }

    /// What clients read, and nothing else.
    static func isPublished(_ path: String) -> Bool {
        let parts = path.split(separator: "/").map(String.init)
        if isHead(path) { return true }
        switch parts.first {
        case "archives"?:
            return parts.count == 2 && parts[1].hasSuffix(".zip") && Hex.isHex(String(parts[1].dropLast(4)), length: 64)
        case "deltas"?:
            return parts.count == 2 && parts[1].hasSuffix(".delta") && Hex.isHex(String(parts[1].dropLast(6)), length: 64)
        case "keys"?:
            return parts.count == 2 && parts[1].hasSuffix(".json") && (Int64(parts[1].dropLast(5)) ?? 0) >= 1
        case "history"?:
            return path == "history/signings.jsonl" || (parts.count == 3 && Int64(parts[1]) != nil
                && ["manifest.json", "head.json", "channels.json"].contains(parts[2]))
        default:
            return false
        }
    }

    /// A release of the history: `history/N/manifest.json` or `history/N/head.json`.
    static func isHistoryRelease(_ path: String) -> Bool {
        path.hasPrefix("history/") && (path.hasSuffix("/manifest.json") || path.hasSuffix("/head.json"))
    }

    /// Written once, never replaced: a key document, a release of the history.
    static func isWriteOnce(_ path: String) -> Bool {
        (path.hasPrefix("keys/") || path.hasPrefix("history/")) && !isMutable(path)
    }

    /// Files that change in place (not heads): pushed after the rest, before the heads.
    static func isMutable(_ path: String) -> Bool {
        path == "history/signings.jsonl" || (path.hasPrefix("history/") && path.hasSuffix("/channels.json"))
    }

    static func cacheControl(_ path: String) -> String {
        isHead(path) || isMutable(path) ? "max-age=60" : "public, max-age=31536000, immutable"
    }

    static func contentType(_ path: String) -> String {
        path.hasSuffix(".json") ? "application/json" : path.hasSuffix(".zip") ? "application/zip" : "application/octet-stream"
    }

    /// Pushes `repo` to `store`. `force`: heads are written over whatever the bucket holds (still
    /// only if it holds what was read just before). `acl`: a canned ACL every uploaded object
    /// gets (`public-read` for buckets that grant reads by ACL; most use a bucket policy).
    package static func push(repo: String, to store: ObjectStore, force: Bool = false, dryRun: Bool = false, acl: String? = nil,
                             partSize: UInt64 = MultipartUpload.defaultPartSize, breakLock: Bool = false, progress: (String) -> Void = { _ in }) throws -> Outcome {
        var out = Outcome()
        let all = try FS.walkFiles(repo).filter { $0 != recordName && $0 != ChannelManifests.uncheckedName }
        out.leftOut = all.filter { !isPublished($0) }.sorted()
        let files = all.filter(isPublished).sorted { order($0) < order($1) }
        // The heads as they are now: what is checked is what is sent.
        var heads: [(path: String, bytes: [UInt8])] = []
        for path in files where isHead(path) { heads.append((path, try FS.readFile(repo + "/" + path, limit: 256 << 20))) }
        guard !heads.isEmpty else { throw AssetPatchError(.argument, "\(repo): no manifest.json or head.json (not a repository?)") }
        // What the bucket holds, read before anything is written.
        var remote: [String: UInt64] = [:]
        let listing = try store.list()
        for (key, size, _) in listing { remote[key] = size }
        // A killed push's probes (an hour old: a running push's is seconds old, and its own).
        for (key, _, modified) in listing where key.hasPrefix(".assetpatch-probe-") && !dryRun && modified > 0 && unixTime() - modified > 3600 {
            try? store.delete(key)
        }
        let record = loadRecord(repo: repo, store: store)
        var headETags: [String: String] = [:]
        var unchanged = Set<String>()
        for (path, bytes) in heads where remote[path] != nil {
            guard let h = try store.head(path), let etag = h.header("etag") else { continue }
            headETags[path] = etag
            if force || record[path] == etag || sameBytes(h, bytes) { continue }
            // This repository's head is the one it last pushed or pulled, and the bucket's moved
            // on since to a newer one (another publisher's change of that channel): not this
            // push's to undo. Anything else there (older, unreadable) is judged as before.
            if let mine = record[path], mine.stripping("\"") == Hex.encode(try Digest.md5(bytes)),
               let (body, _) = try store.get(path, limit: 64 << 20), let theirs = fields(body), let ours = fields(bytes),
               (theirs.version, theirs.revision) > (ours.version, ours.revision) {
                unchanged.insert(path)
                continue
            }
            if try !madeHere(repo: repo, store: store, path: path, local: bytes) {
                throw AssetPatchError(.state, "\(store.location.shown)\(path) holds \(try describe(store, path)), which this repository did not make: another publisher's? Nothing was uploaded. Publish from a repository that holds it, or push with --force to replace it")
            }
        }
        if !dryRun { out.conditionalWrites = try probeConditionalWrites(store) }
        // Without conditional writes, a lock object stands in for them (PublishLock).
        let lock = !dryRun && !out.conditionalWrites ? try PublishLock.acquire(store, breaking: breakLock) : nil
        defer { lock?.release() }
        var present = Set(remote.keys)
        for path in files where !isHead(path) {
            let local = repo + "/" + path
            if isMutable(path) {
                // Changed in place by every publisher: merged with the bucket's, written only
                // over the version read (or under the lock), so no publisher's lines are lost.
                if try pushMerged(path, repo: repo, store: store, conditional: out.conditionalWrites, dryRun: dryRun, acl: acl) {
                    out.uploaded.append(path)
                    progress(path)
                } else {
                    out.skipped += 1
                }
                present.insert(path)
                try lock?.renew()
                continue
            }
            let (sha, md5) = (try Digest.hexOfFile(local), try Digest.hexOfFile(local, .md5))
            let size = FS.fileSize(local) ?? 0
            if let have = remote[path], have == size, let h = try store.head(path), same(h, sha: sha, md5: md5) {
                out.skipped += 1
                continue
            }
            let once = isWriteOnce(path)
            if once, try remote[path] != nil || (!out.conditionalWrites && store.head(path) != nil) {
                throw AssetPatchError(.state, "\(store.location.shown)\(path) holds another publisher's \(what(path)); nothing of this repository's heads was written")
            }
            if dryRun { out.uploaded.append(path); continue }
            do {
                if size > partSize && !once {
                    // Archives: named by their hash, so a resumed upload's parts can only be these bytes.
                    let upload = try MultipartUpload(store: store, key: path, file: local, size: size, preferredPartSize: partSize)
                    let done = try upload.run(sha256: sha, contentType: contentType(path), cacheControl: cacheControl(path), acl: acl) { n, count in
                        progress("\(path) (part \(n) of \(count))")
                        try? lock?.renew()  // a long upload: the lock must not lapse under it
                    }
                    out.multipart += 1
                    out.parts += done.parts
                    out.partsResumed += done.resumed
                } else {
                    try store.put(path, file: local, sha256: sha, md5: md5, contentType: contentType(path), cacheControl: cacheControl(path), acl: acl,
                                  condition: once && out.conditionalWrites ? .absent : .none)
                }
            } catch let e as AssetPatchError where e.status == .state && once {
                throw AssetPatchError(.state, "\(store.location.shown)\(path): another publisher wrote its \(what(path)) at the same time; nothing of this repository's heads was written")
            }
            guard let check = try store.head(path), UInt64(check.header("content-length") ?? "") == size, same(check, sha: sha, md5: md5) else {
                throw AssetPatchError(.integrity, "\(store.location.shown)\(path): not what was uploaded when read back")
            }
            present.insert(path)
            out.uploaded.append(path)
            out.bytes += size
            progress(path)
            try lock?.renew()
        }
        var pushed = record
        for (path, bytes) in heads {
            if unchanged.contains(path) {
                out.leftAlone.append(path)
                continue
            }
            if let missing = try named(by: bytes, at: path).first(where: { !present.contains($0) }) {
                throw AssetPatchError(.state, "\(path) names \(missing), which neither this push nor the bucket has: not written (is \(missing) a symbolic link, or was it removed?)")
            }
            if let etag = headETags[path], let h = try store.head(path), sameBytes(h, bytes) {
                pushed[path] = etag
                out.skipped += 1
                continue
            }
            if dryRun { out.heads.append(path); continue }
            let read: String? = force ? try store.head(path)?.header("etag") : headETags[path]
            if !out.conditionalWrites {
                // The store ignores conditions: the lock still this push's, and the head as read.
                try lock?.check()
                let now = try store.head(path)?.header("etag")
                if now != read {
                    throw AssetPatchError(.state, "\(store.location.shown)\(path) changed during this push (now \(try describe(store, path))): not replaced")
                }
            }
            let sha = Digest.sha256Hex(bytes), md5 = Hex.encode(try Digest.md5(bytes))
            do {
                pushed[path] = try store.put(path, bytes: bytes, sha256: sha, md5: md5, contentType: contentType(path), cacheControl: cacheControl(path),
                                             acl: acl, condition: out.conditionalWrites ? read.map { .etag($0) } ?? .absent : .none)
            } catch let e as AssetPatchError where e.status == .state {
                throw AssetPatchError(.state, "\(store.location.shown)\(path) changed during this push: another publisher wrote \(try describe(store, path)); everything uploaded so far is written once and named by the heads there or by none, so the bucket is consistent. Not replaced")
            }
            out.heads.append(path)
            try saveRecord(repo: repo, store: store, pushed)
            progress(path)
        }
        if !dryRun { try saveRecord(repo: repo, store: store, pushed) }
        return out
    }

    /// Writes the bucket's `path` merged with the repository's (`HistoryMerge`), keeping the
    /// merge locally too; retried when another publisher wrote it in between. False when the
    /// bucket held it all already.
    static func pushMerged(_ path: String, repo: String, store: ObjectStore, conditional: Bool, dryRun: Bool, acl: String?) throws -> Bool {
        let local = repo + "/" + path
        for _ in 0..<5 {
            var bytes = try FS.readFile(local, limit: 256 << 20)
            let current = try store.get(path, limit: 256 << 20)
            if let current {
                guard let merged = HistoryMerge.merge(path, ours: bytes, theirs: current.body) else {
                    throw AssetPatchError(.state, "\(store.location.shown)\(path) can't be merged with \(local)")
                }
                if merged != bytes && !dryRun { try FS.writeAtomically(local, merged) }
                if merged == current.body { return false }
                bytes = merged
            }
            if dryRun { return true }
            let md5 = Hex.encode(try Digest.md5(bytes))
            do {
                try store.put(path, bytes: bytes, sha256: Digest.sha256Hex(bytes), md5: md5, contentType: contentType(path),
                              cacheControl: cacheControl(path), acl: acl,
                              condition: conditional ? current?.etag.map { .etag($0) } ?? .absent : .none)
                return true
            } catch let e as AssetPatchError where e.status == .state {
                continue  // written meanwhile: merged again with what is there now
            }
        }
        throw AssetPatchError(.state, "\(store.location.shown)\(path) kept changing while this push merged it: try again")
    }

    /// Archives, then key documents, then the history's releases, then what changes, then the
    /// heads (per channel, head.json before the manifest.json that names it).
    static func order(_ path: String) -> (Int, String) {
        if isHead(path) {
            let dir = String(path.dropLast(path.hasSuffix("head.json") ? "head.json".count : "manifest.json".count))
            return (4, dir + (path.hasSuffix("head.json") ? "0" : "1"))
        }
        if isMutable(path) { return (3, path) }
        if path.hasPrefix("archives/") || path.hasPrefix("deltas/") { return (0, path) }
        if path.hasPrefix("keys/") { return (1, path) }
        return (2, path)
    }

    static func what(_ path: String) -> String {
        let parts = path.split(separator: "/")
        return path.hasPrefix("keys/") ? "key document \(parts[1].dropLast(5))" : "version \(parts.count > 1 ? String(parts[1]) : "?")"
    }

    /// The objects a head names, as keys of the repository: its archive, and its key documents.
    static func named(by bytes: [UInt8], at path: String) throws -> [String] {
        guard var json = try? JSONParser.parse(bytes) else { throw AssetPatchError(.manifest, "\(path): not JSON") }
        if let payload = json["payload"]?.string, let inner = Base64.decode(payload), let p = try? JSONParser.parse(inner) { json = p }
        // RFC 3986 resolution against the head's place in a stand-in root; an absolute URL (on
        // another host) or one climbing out of the repository is not this bucket's.
        let root = "file:///repository/"
        func resolve(_ url: String) -> String? {
            let resolved = URLs.resolve(url, against: root + path)
            guard resolved.hasPrefix(root) else { return nil }
            return String(resolved.dropFirst(root.count)).stripping("/")
        }
        var out: [String] = []
        if let url = json["archive"]?["url"]?.string, let key = resolve(url) { out.append(key) }
        for d in json["index"]?["deltas"]?.array ?? [] {
            if let url = d["url"]?.string, let key = resolve(url) { out.append(key) }
        }
        if let v = json["keys"]?["version"]?.int64, let url = json["keys"]?["url"]?.string, let base = resolve(url), v >= 1 {
            out += (1...v).map { "\(base)/\($0).json" }
        }
        return out
    }

    /// Whether the head the bucket holds at `path` is one this repository made: a version its
    /// history holds with the same archive, at a revision not above the local head's.
    static func madeHere(repo: String, store: ObjectStore, path: String, local: [UInt8]) throws -> Bool {
        guard let (body, _) = try store.get(path, limit: 64 << 20), let theirs = fields(body), let ours = fields(local),
              let history = try? FS.readFile(repo + "/history/\(theirs.version)/manifest.json", limit: 256 << 20),
              let recorded = try? JSONParser.parse(history) else { return false }
        return recorded["archive"]?["sha256"]?.string == theirs.archive
            && (theirs.version, theirs.revision) <= (ours.version, ours.revision)
    }

    static func fields(_ bytes: [UInt8]) -> (version: Int64, revision: Int64, archive: String)? {
        guard var json = try? JSONParser.parse(bytes) else { return nil }
        if let payload = json["payload"]?.string, let inner = Base64.decode(payload), let p = try? JSONParser.parse(inner) { json = p }
        guard let v = json["version"]?.int64, let sha = json["archive"]?["sha256"]?.string else { return nil }
        return (v, json["revision"]?.int64 ?? 0, sha)
    }

    /// Whether the object described by `h` holds these bytes: by the MD5 a single-part upload's
    /// ETag is (checked by the store against the bytes it received), and by the sha256 kept as
    /// metadata when the store keeps it.
    static func same(_ h: ObjectStore.Response, sha: String, md5: String) -> Bool {
        let kept = h.keptSHA256
        if let kept, kept != sha { return false }
        guard let etag = h.header("etag")?.stripping("\""), Hex.isHex(etag, length: 32), !h.etagIsNotMD5 else {
            return kept == sha  // a multipart ETag: only the metadata says
        }
        return etag == md5
    }

    static func sameBytes(_ h: ObjectStore.Response, _ bytes: [UInt8]) -> Bool {
        guard let md5 = try? Digest.md5(bytes) else { return false }
        return same(h, sha: Digest.sha256Hex(bytes), md5: Hex.encode(md5))
    }

    /// "version N" of the head at `key` in the bucket, for messages.
    static func describe(_ store: ObjectStore, _ key: String) throws -> String {
        guard let (body, _) = try store.get(key, limit: 64 << 20) else { return "nothing" }
        return fields(body).map { "version \($0.version) (revision \($0.revision))" } ?? "a head this tool can't read"
    }

    /// Whether the store refuses writes whose condition fails, both kinds: `If-None-Match: *` on
    /// an existing object and `If-Match` with another ETag. The probe object is deleted (and a
    /// killed push's, at the next).
    static func probeConditionalWrites(_ store: ObjectStore) throws -> Bool {
        var rng = SystemRandomNumberGenerator()
        let key = ".assetpatch-probe-" + Hex.encode((0..<8).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let bytes = Array("probe".utf8), sha = Digest.sha256Hex(bytes), md5 = Hex.encode(try Digest.md5(bytes))
        defer { try? store.delete(key) }
        try store.put(key, bytes: bytes, sha256: sha, md5: md5, contentType: "text/plain", cacheControl: nil, condition: .absent)
        for condition in [ObjectStore.Condition.absent, .etag("\"00000000000000000000000000000000\"")] {
            do {
                try store.put(key, bytes: bytes, sha256: sha, md5: md5, contentType: "text/plain", cacheControl: nil, condition: condition)
                return false
            } catch let e as AssetPatchError where e.status == .state {
                continue
            }
        }
        return true
    }

    /// The record's entry for this bucket: endpoint, bucket and prefix.
    static func recordKey(_ store: ObjectStore) -> String { store.location.endpoint + " " + store.location.shown }

    static func loadRecord(repo: String, store: ObjectStore) -> [String: String] {
        guard let bytes = try? FS.readFile(repo + "/" + recordName, limit: 1 << 20), let json = try? JSONParser.parse(bytes),
              let heads = json[recordKey(store)], case let .object(pairs) = heads else { return [:] }
        var out: [String: String] = [:]
        for (k, v) in pairs { if let s = v.string { out[k] = s } }
        return out
    }

    static func saveRecord(repo: String, store: ObjectStore, _ heads: [String: String]) throws {
        var pairs: [(String, JSON)] = []
        if let bytes = try? FS.readFile(repo + "/" + recordName, limit: 1 << 20), case let .object(all)? = try? JSONParser.parse(bytes) {
            pairs = all.filter { $0.0 != recordKey(store) }
        }
        pairs.append((recordKey(store), .object(heads.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })))
        try FS.writeAtomically(repo + "/" + recordName, Array((JSON.object(pairs).serialized(indent: 2) + "\n").utf8))
    }
}
