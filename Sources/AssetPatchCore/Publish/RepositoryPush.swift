import Glibc

/// A repository written to a bucket in the order clients can live with (`assetpatch push`):
///
/// 1. Immutable objects first (archives, index pages, key documents, the history's releases),
///    each skipped when the bucket has it with the same size and sha256, each checked after
///    its upload (size and the sha256 the store verified).
/// 2. The other files that change (the history's offer lists, the signing log).
/// 3. The heads last (`manifest.json` then `head.json`, per channel), each written once and
///    conditionally: only if the bucket still holds the head this repository last pushed or
///    pulled (its ETag, kept in `.assetpatch-remote.json`), or none for a first push. So no
///    moment exists where a head names a missing object, and a publisher whose repository is
///    behind the bucket's fails, naming the version there, instead of overwriting it.
package enum RepositoryPush {
    package struct Outcome {
        package var uploaded: [String] = []
        package var skipped = 0
        package var bytes: UInt64 = 0
        package var heads: [String] = []
        /// The store ignored a conditional write (probed): heads were compared by a read just
        /// before their write instead, which a publisher racing in between can still pass.
        package var conditionalWrites = true
    }

    /// The local record of what this repository last pushed: the heads' ETags per bucket.
    static let recordName = ".assetpatch-remote.json"

    package static func isHead(_ path: String) -> Bool {
        let parts = path.split(separator: "/")
        let name = parts.last.map(String.init) ?? ""
        guard name == "manifest.json" || name == "head.json" else { return false }
        return parts.count == 1 || (parts.count == 3 && parts[0] == "channels")
    }

    /// Files that change in place (not heads): pushed before the heads, unconditionally.
    static func isMutable(_ path: String) -> Bool {
        path == "history/signings.jsonl" || (path.hasPrefix("history/") && path.hasSuffix("/channels.json"))
    }

    /// A release of the history (`history/<v>/manifest.json` or `head.json`): written once,
    /// never replaced. Two publishers' version N are a conflict, not an update.
    static func isHistoryRelease(_ path: String) -> Bool {
        let parts = path.split(separator: "/")
        return parts.count == 3 && parts[0] == "history" && Int64(parts[1]) != nil && (parts[2] == "manifest.json" || parts[2] == "head.json")
    }

    /// Files of the publisher's alone: never pushed.
    static func isLocal(_ path: String) -> Bool {
        path == recordName || path == "keys/staged.json" || path.contains(".tmp.") || path.hasSuffix(".lock")
    }

    static func cacheControl(_ path: String) -> String {
        isHead(path) || isMutable(path) ? "max-age=60" : "public, max-age=31536000, immutable"
    }

    static func contentType(_ path: String) -> String {
        path.hasSuffix(".json") ? "application/json" : path.hasSuffix(".zip") ? "application/zip" : "application/octet-stream"
    }

    /// Pushes `repo` to `store`. `force`: heads are written whatever the bucket holds.
    /// `acl`: a canned ACL every object gets (`public-read` for buckets that use ACLs; most
    /// give read access by a bucket policy instead).
    package static func push(repo: String, to store: ObjectStore, force: Bool = false, dryRun: Bool = false, acl: String? = nil,
                             progress: (String) -> Void = { _ in }) throws -> Outcome {
        var out = Outcome()
        let files = try FS.walkFiles(repo).filter { !isLocal($0) }.sorted { order($0) < order($1) }
        guard files.contains(where: isHead) else { throw AssetPatchError(.argument, "\(repo): no manifest.json or head.json (not a repository?)") }
        let record = loadRecord(repo: repo, store: store)
        // What the bucket holds now, read before anything is written.
        var remote: [String: UInt64] = [:]
        for (key, size) in try store.list() { remote[key] = size }
        var headETags: [String: String] = [:]
        for path in files where isHead(path) && remote[path] != nil {
            if let h = try store.head(path) { headETags[path] = h.header("etag") }
        }
        if !force {
            for path in files where isHead(path) {
                let known = record[path]
                if let now = headETags[path], known != now {
                    throw AssetPatchError(.state, "\(store.location.shown)\(path) holds \(try describe(store, path)), which this repository did not push or pull: another publisher's? Nothing was uploaded. Bring its releases into this repository, or push with --force to replace it")
                }
            }
        }
        if !dryRun { out.conditionalWrites = try probeConditionalWrites(store) }
        for path in files where !isHead(path) {
            let local = repo + "/" + path
            let sha = try Digest.hexOfFile(local)
            let size = FS.fileSize(local) ?? 0
            if let have = remote[path], have == size, let h = try store.head(path), try same(h, local, sha) {
                out.skipped += 1
                continue
            }
            let once = isHistoryRelease(path)
            let standing = try remote[path] != nil || (!out.conditionalWrites && store.head(path) != nil)
            if once, standing {
                throw AssetPatchError(.state, "\(store.location.shown)\(path): another publisher published version \(path.split(separator: "/")[1]) with other content; nothing of this repository's heads was written")
            }
            if dryRun { out.uploaded.append(path); continue }
            do {
                try store.put(path, file: local, sha256: sha, contentType: contentType(path), cacheControl: cacheControl(path), acl: acl,
                              condition: once && out.conditionalWrites ? .absent : .none)
            } catch let e as AssetPatchError where e.status == .state && once {
                throw AssetPatchError(.state, "\(store.location.shown)\(path): another publisher published version \(path.split(separator: "/")[1]) at the same time; nothing of this repository's heads was written")
            }
            guard let check = try store.head(path), UInt64(check.header("content-length") ?? "") == size, try same(check, local, sha) else {
                throw AssetPatchError(.integrity, "\(store.location.shown)\(path): not what was uploaded when read back")
            }
            out.uploaded.append(path)
            out.bytes += size
            progress(path)
        }
        var pushed = record
        for path in files where isHead(path) {
            let local = repo + "/" + path
            let sha = try Digest.hexOfFile(local)
            if let etag = headETags[path], let h = try store.head(path), try same(h, local, sha) {
                pushed[path] = etag
                out.skipped += 1
                continue
            }
            if dryRun { out.heads.append(path); continue }
            let condition: ObjectStore.Condition = force ? .none : headETags[path].map { .etag($0) } ?? .absent
            if !out.conditionalWrites, !force {
                // The store ignores conditions: compare by a read just before the write.
                let now = try store.head(path)?.header("etag")
                if now != headETags[path] {
                    throw AssetPatchError(.state, "\(store.location.shown)\(path) changed during this push (now \(try describe(store, path))): not replaced")
                }
            }
            do {
                pushed[path] = try store.put(path, file: local, sha256: sha, contentType: contentType(path), cacheControl: cacheControl(path),
                                             acl: acl, condition: out.conditionalWrites ? condition : .none)
            } catch let e as AssetPatchError where e.status == .state {
                throw AssetPatchError(.state, "\(store.location.shown)\(path) changed during this push: another publisher wrote \(try describe(store, path)); everything uploaded so far is immutable and named by the heads there or by none, so the bucket is consistent. Not replaced")
            }
            out.heads.append(path)
            try saveRecord(repo: repo, store: store, pushed)
            progress(path)
        }
        if !dryRun { try saveRecord(repo: repo, store: store, pushed) }
        return out
    }

    /// Whether the object described by `h` holds the bytes of `local`: by the sha256 kept as its
    /// metadata, or, on stores that keep no metadata, by its ETag, the MD5 of a single-part
    /// upload's bytes.
    static func same(_ h: ObjectStore.Response, _ local: String, _ sha: String) throws -> Bool {
        if let kept = h.header("x-amz-meta-sha256") { return kept == sha }
        guard let etag = h.header("etag") else { return false }
        return etag.stripping("\"") == (try Digest.hexOfFile(local, .md5))
    }

    /// Archives, then index pages and key documents, then the history, then the rest.
    static func order(_ path: String) -> (Int, String) {
        if path.hasPrefix("archives/") { return (0, path) }
        if path.hasPrefix("index/") || path.hasPrefix("keys/") { return (1, path) }
        if path.hasPrefix("history/") { return (2, path) }
        if isHead(path) {  // per channel, manifest.json (clients before 0.4) then head.json
            let dir = String(path.dropLast(path.hasSuffix("head.json") ? "head.json".count : "manifest.json".count))
            return (4, dir + (path.hasSuffix("head.json") ? "1" : "0"))
        }
        return (3, path)
    }

    /// "version N" of the head at `key` in the bucket, for messages.
    static func describe(_ store: ObjectStore, _ key: String) throws -> String {
        guard let (body, _) = try store.get(key, limit: 64 << 20) else { return "nothing" }
        var json = try? JSONParser.parse(body)
        if let payload = json?["payload"]?.string, let inner = Base64.decode(payload) { json = try? JSONParser.parse(inner) }
        return json?["version"]?.int64.map { "version \($0)" } ?? "a head this tool can't read"
    }

    /// Whether the store refuses a write whose condition fails (`If-None-Match: *` on an
    /// existing object); the probe object is deleted.
    static func probeConditionalWrites(_ store: ObjectStore) throws -> Bool {
        var rng = SystemRandomNumberGenerator()
        let key = ".assetpatch-probe-" + Hex.encode((0..<8).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let bytes = Array("probe".utf8), sha = Digest.sha256Hex(bytes)
        defer { try? store.delete(key) }
        try store.put(key, bytes: bytes, sha256: sha, contentType: "text/plain", cacheControl: nil, condition: .absent)
        do {
            try store.put(key, bytes: bytes, sha256: sha, contentType: "text/plain", cacheControl: nil, condition: .absent)
            return false
        } catch let e as AssetPatchError where e.status == .state {
            return true
        }
    }

    static func loadRecord(repo: String, store: ObjectStore) -> [String: String] {
        guard let bytes = try? FS.readFile(repo + "/" + recordName, limit: 1 << 20), let json = try? JSONParser.parse(bytes),
              let heads = json[store.location.shown], case let .object(pairs) = heads else { return [:] }
        var out: [String: String] = [:]
        for (k, v) in pairs { if let s = v.string { out[k] = s } }
        return out
    }

    static func saveRecord(repo: String, store: ObjectStore, _ heads: [String: String]) throws {
        var pairs: [(String, JSON)] = []
        if let bytes = try? FS.readFile(repo + "/" + recordName, limit: 1 << 20), case let .object(all)? = try? JSONParser.parse(bytes) {
            pairs = all.filter { $0.0 != store.location.shown }
        }
        pairs.append((store.location.shown, .object(heads.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })))
        try FS.writeAtomically(repo + "/" + recordName, Array((JSON.object(pairs).serialized(indent: 2) + "\n").utf8))
    }
}
