import Glibc

/// `assetpatch gc`: archives no head and no release of the history names, deleted once they
/// are older than a grace period (a client mid-update may still be fetching one that a head
/// named until a moment ago). In a directory or a bucket, where uploads in parts never
/// completed (a push killed and not run again) are aborted past the grace period too. Such archives are what a failed or
/// losing publish left behind, or what was uploaded by hand; every archive a head or the
/// history names stays (clients may still run, and roll back to, any release of the history).
package enum RepositoryGC {
    package struct Outcome {
        package var deleted: [String] = []
        package var bytes: UInt64 = 0
        /// Unnamed archives kept because they are younger than the grace period.
        package var young: [String] = []
        package var kept = 0
        /// Multipart uploads begun and never completed (a killed push's), aborted once past the
        /// grace period: the store keeps, and bills, their parts until then.
        package var aborted: [String] = []
        /// Why unfinished uploads could not be listed (a store without multipart listings).
        package var uploadsUnlisted: String?
    }

    /// Where the repository is.
    package enum Place {
        case directory(String)
        case bucket(ObjectStore)

        func list() throws -> [(key: String, size: UInt64, modified: Int64)] {
            switch self {
            case let .directory(root):
                return try FS.walkFiles(root).map { key in
                    var st = stat()
                    let modified = lstat(root + "/" + key, &st) == 0 ? Int64(st.st_mtim.tv_sec) : 0
                    return (key, FS.fileSize(root + "/" + key) ?? 0, modified)
                }
            case let .bucket(store):
                return try store.list()
            }
        }

        func read(_ key: String) throws -> [UInt8]? {
            switch self {
            case let .directory(root):
                return FS.exists(root + "/" + key) ? try FS.readFile(root + "/" + key, limit: 256 << 20) : nil
            case let .bucket(store):
                return try store.get(key, limit: 256 << 20)?.body
            }
        }

        func delete(_ key: String) throws {
            switch self {
            case let .directory(root): try FS.unlink(root + "/" + key)
            case let .bucket(store): try store.delete(key)
            }
        }
    }

    package static func collect(_ place: Place, grace: Int64, now: Int64 = unixTime(), dryRun: Bool) throws -> Outcome {
        let objects = try place.list()
        let keys = Set(objects.map(\.key))
        // Everything named: by each channel's heads, and by each release of the history.
        var named = Set<String>()
        var heads = 0
        for key in keys where RepositoryPush.isHead(key) || RepositoryPush.isHistoryRelease(key) {
            guard let bytes = try place.read(key) else { continue }
            // A head that can't be read could name any archive: nothing is deleted then.
            guard RepositoryPush.fields(bytes) != nil else {
                throw AssetPatchError(.manifest, "\(key): not a head this tool can read (no version or archive): nothing deleted")
            }
            // History payloads hold root-relative URLs, as the repository's own heads do.
            let at = key.hasPrefix("history/") ? (key.hasSuffix("head.json") ? "head.json" : "manifest.json") : key
            named.formUnion(try RepositoryPush.named(by: bytes, at: at))
            if RepositoryPush.isHead(key) { heads += 1 }
        }
        guard heads > 0 else { throw AssetPatchError(.argument, "no manifest.json or head.json there: not a repository, nothing deleted") }
        var out = Outcome()
        for object in objects.sorted(by: { $0.key < $1.key }) where object.key.hasPrefix("archives/") || object.key.hasPrefix("deltas/") {
            if named.contains(object.key) { out.kept += 1; continue }
            guard object.modified > 0, now - object.modified >= grace else {
                out.young.append(object.key)
                continue
            }
            if !dryRun { try place.delete(object.key) }
            out.deleted.append(object.key)
            out.bytes += object.size
        }
        if case let .bucket(store) = place {
            let uploads: [ObjectStore.PendingUpload]
            do { uploads = try store.listMultipartUploads() } catch let e as AssetPatchError {
                out.uploadsUnlisted = e.message
                return out
            }
            // Only uploads of what a push puts in parts: other software may share the bucket.
            for upload in uploads where RepositoryPush.isPublished(upload.key) && upload.initiated > 0 && now - upload.initiated >= grace {
                if !dryRun { try store.abortMultipart(upload.key, uploadID: upload.id) }
                out.aborted.append(upload.key)
            }
        }
        return out
    }
}
