import Glibc

/// A large file put in parts (S3's multipart upload): parts of one size but the last (R2
/// refuses anything else), each sent with its MD5 and sha256 and its ETag checked; resumed
/// after a kill from the parts the store already holds (listed and checked against the file's
/// bytes, never trusted by number alone); aborted when a part or the completion fails.
package struct MultipartUpload {
    /// S3's bounds: a part but the last is at least 5 MiB; at most 10,000 parts; 5 TiB in all.
    package static let minimumPartSize: UInt64 = 5 << 20
    package static let defaultPartSize: UInt64 = 16 << 20
    package static let maximumPartSize: UInt64 = 5 << 30
    static let maxParts: UInt64 = 10_000
    static let maxObjectBytes: UInt64 = 5 << 40

    package struct Outcome {
        package var etag: String?
        package var parts = 0
        /// Parts a killed push had uploaded, checked and kept.
        package var resumed = 0
    }

    let store: ObjectStore
    let key: String
    let file: String
    let size: UInt64
    let partSize: UInt64

    /// The part size used for `size` bytes: `preferred` (at least 5 MiB), grown to whole MiB
    /// when 10,000 parts would not hold the file.
    package static func partSize(for size: UInt64, preferred: UInt64) -> UInt64 {
        let needed = (size + maxParts - 1) / maxParts
        let mib: UInt64 = 1 << 20
        return max(preferred, minimumPartSize, (needed + mib - 1) / mib * mib)
    }

    package init(store: ObjectStore, key: String, file: String, size: UInt64, preferredPartSize: UInt64) throws {
        guard size <= MultipartUpload.maxObjectBytes else {
            throw AssetPatchError(.argument, "\(key): \(size) bytes, over the 5 TiB an object may hold")
        }
        self.store = store
        self.key = key
        self.file = file
        self.size = size
        partSize = MultipartUpload.partSize(for: size, preferred: preferredPartSize)
    }

    var count: Int { Int((size + partSize - 1) / partSize) }

    func range(_ number: Int) -> (offset: UInt64, length: Int) {
        let offset = UInt64(number - 1) * partSize
        return (offset, Int(min(partSize, size - offset)))
    }

    /// Uploads the file, resuming an upload of this key whose parts hold the file's bytes.
    package func run(sha256: String, contentType: String, cacheControl: String?, acl: String?,
                     progress: (Int, Int) -> Void = { _, _ in }) throws -> Outcome {
        let source = try File.openRead(file)
        var md5s: [[UInt8]] = []
        for n in 1...count {
            let (offset, length) = range(n)
            md5s.append(try Digest.md5(try source.preadExactly(length, at: offset, what: file)))
        }
        var out = Outcome()
        out.parts = count
        var (uploadID, done) = try resumable(md5s)
        if uploadID == nil {
            uploadID = try store.createMultipart(key, sha256: sha256, contentType: contentType, cacheControl: cacheControl, acl: acl)
        }
        guard let uploadID else { throw AssetPatchError(.internal, "no upload id") }
        var opaque = false
        out.resumed = done.count
        do {
            for n in 1...count where done[n] == nil {
                let (offset, length) = range(n)
                let bytes = try source.preadExactly(length, at: offset, what: file)
                let md5 = try Digest.md5(bytes)
                guard md5 == md5s[n - 1] else { throw AssetPatchError(.integrity, "\(file) changed during the upload") }
                let (etag, notMD5) = try store.uploadPart(key, uploadID: uploadID, number: n, bytes: bytes, md5: md5)
                // The store checked the part against its Content-MD5. Where its ETag is an MD5
                // (AWS without KMS, MinIO...) it must be this one; R2's and KMS's are not.
                if notMD5 { opaque = true }
                if !notMD5, let e = etag.map(Self.unquoted), Hex.isHex(e, length: 32), e != Hex.encode(md5) {
                    throw AssetPatchError(.integrity, "\(store.location.shown)\(key): part \(n)'s ETag \(e) is not the MD5 of the bytes sent")
                }
                if etag.map(Self.unquoted).map({ Hex.isHex($0, length: 32) }) != true { opaque = true }
                done[n] = etag
                progress(n, count)
            }
            out.etag = try store.completeMultipart(key, uploadID: uploadID, parts: (1...count).map { ($0, done[$0] ?? "") })
        } catch let e as AssetPatchError where e.status == .network || e.transient {
            // The network or a busy store: the parts up are kept, and the next push resumes.
            throw AssetPatchError(e.status, "\(e.message) (the upload of \(key) is left open: the next push resumes it from its \(done.count) parts up)")
        } catch {
            // Completed by another push of the same archive meanwhile (NoSuchUpload): there whole.
            if let h = try? store.head(key), h.keptSHA256 == sha256,
               UInt64(h.header("content-length") ?? "") == size {
                out.etag = h.header("etag")
                return out
            }
            // A refusal: nothing half-made is left behind (a kill leaves it to be resumed, or collected).
            try? store.abortMultipart(key, uploadID: uploadID)
            throw error
        }
        // A composite ETag is the MD5 of the parts' MD5s and their number: the parts listed. A
        // store whose ETags are opaque (R2) or not of this form (rclone) can't be checked so.
        if !opaque, let etag = out.etag.map(Self.unquoted), let dash = etag.lastIndex(of: "-"),
           Hex.isHex(String(etag[..<dash]), length: 32), let n = Int(etag[etag.index(after: dash)...]) {
            let expected = Hex.encode(try Digest.md5(md5s.flatMap { $0 })) + "-\(count)"
            guard etag == expected && n == count else {
                try? store.delete(key)  // never left for a later push to skip as present
                throw AssetPatchError(.integrity, "\(store.location.shown)\(key): completed as \(etag), not the \(expected) of the parts sent; deleted")
            }
        }
        return out
    }

    /// An upload of this key a killed push began, with the parts of it that hold this file's
    /// bytes at this part size. Uploads of other part sizes are left alone (another
    /// publisher's may be running; gc aborts them once past its grace period).
    func resumable(_ md5s: [[UInt8]]) throws -> (String?, [Int: String]) {
        let uploads = (try? store.listMultipartUploads(under: key)) ?? []
        for upload in uploads.filter({ $0.key == key }).sorted(by: { $0.initiated > $1.initiated }) {
            guard let parts = try? store.listParts(key, uploadID: upload.id) else { continue }
            var done: [Int: String] = [:]
            var fits = true
            for part in parts {
                guard part.number >= 1, part.number <= count, UInt64(part.size) == UInt64(range(part.number).length) else { fits = false; break }
                if Self.unquoted(part.etag) == Hex.encode(md5s[part.number - 1]) { done[part.number] = part.etag }
            }
            if fits { return (upload.id, done) }
            // Another part size: maybe another publisher's running push; gc collects it if not.
        }
        return (nil, [:])
    }

    static func unquoted(_ etag: String) -> String { etag.stripping("\"").lowercased() }

}

/// S3's multipart requests, as the store signs them: every query in name order.
extension ObjectStore {
    package struct PendingUpload { package var key: String; package var id: String; package var initiated: Int64 }
    package struct Part { package var number: Int; package var etag: String; package var size: Int64 }

    func createMultipart(_ key: String, sha256: String, contentType: String, cacheControl: String?, acl: String?) throws -> String {
        let headers = ObjectStore.described(sha256: sha256, contentType: contentType, cacheControl: cacheControl, acl: acl)
        let r = try request("POST", key, query: "uploads=", headers: headers)
        try expect(r, [200], "POST (create multipart)", key)
        guard let id = XMLText.first("UploadId", in: r.body).map(XMLText.unescape), !id.isEmpty else {
            throw AssetPatchError(.http, "\(location.shown)\(key): a multipart upload created without an UploadId")
        }
        return id
    }

    func uploadPart(_ key: String, uploadID: String, number: Int, bytes: [UInt8], md5: [UInt8]) throws -> (etag: String?, notMD5: Bool) {
        let query = "partNumber=\(number)&uploadId=" + ObjectStore.encode(uploadID, slash: true)
        let r = try request("PUT", key, query: query, headers: ["Content-MD5: \(Base64.encode(md5))"],
                            payloadSHA256: Digest.sha256Hex(bytes), upload: .bytes(bytes))
        try expect(r, [200], "PUT (part \(number))", key)
        return (r.header("etag"), r.etagIsNotMD5)
    }

    func completeMultipart(_ key: String, uploadID: String, parts: [(Int, String)]) throws -> String? {
        var xml = "<CompleteMultipartUpload>"
        for (n, etag) in parts { xml += "<Part><PartNumber>\(n)</PartNumber><ETag>\(XMLText.escape(etag))</ETag></Part>" }
        xml += "</CompleteMultipartUpload>"
        let body = Array(xml.utf8)
        let r = try request("POST", key, query: "uploadId=" + ObjectStore.encode(uploadID, slash: true),
                            headers: ["Content-Type: application/xml"], payloadSHA256: Digest.sha256Hex(body), upload: .bytes(body))
        try expect(r, [200], "POST (complete multipart)", key)
        // The store may answer 200 and still fail: the error is then in the body.
        if let code = XMLText.first("Code", in: r.body), XMLText.all("Error", in: r.body).count > 0 {
            throw AssetPatchError(.http, "POST (complete multipart) \(location.shown)\(key): \(code)",
                                  transient: ["InternalError", "SlowDown", "RequestTimeout"].contains(code))
        }
        return XMLText.first("ETag", in: r.body).map(XMLText.unescape) ?? r.header("etag")
    }

    func abortMultipart(_ key: String, uploadID: String) throws {
        let r = try request("DELETE", key, query: "uploadId=" + ObjectStore.encode(uploadID, slash: true))
        try expect(r, [200, 204, 404], "DELETE (abort multipart)", key)
    }

    /// Multipart uploads begun and neither completed nor aborted, under the prefix plus `under`.
    package func listMultipartUploads(under: String = "") throws -> [PendingUpload] {
        var out: [PendingUpload] = []
        var marker: (key: String, id: String)?
        repeat {
            var query = ""
            if let m = marker { query += "key-marker=" + ObjectStore.encode(m.key, slash: true) + "&" }
            query += "prefix=" + ObjectStore.encode(location.prefix + under, slash: true)
            if let m = marker { query += "&upload-id-marker=" + ObjectStore.encode(m.id, slash: true) }
            query += "&uploads="
            let r = try request("GET", "", query: query, bucketLevel: true, limit: 16 << 20)
            try expect(r, [200], "GET (list multipart uploads)", under)
            for item in XMLText.all("Upload", in: r.body) {
                guard let key = XMLText.first("Key", in: item).map(XMLText.unescape), key.hasPrefix(location.prefix),
                      let id = XMLText.first("UploadId", in: item).map(XMLText.unescape) else { continue }
                out.append(PendingUpload(key: String(key.dropFirst(location.prefix.count)), id: id,
                                  initiated: XMLText.first("Initiated", in: item).flatMap(RFC3339.parse) ?? 0))
            }
            guard XMLText.first("IsTruncated", in: r.body) == "true",
                  let key = XMLText.first("NextKeyMarker", in: r.body).map(XMLText.unescape),
                  let id = XMLText.first("NextUploadIdMarker", in: r.body).map(XMLText.unescape) else { break }
            guard marker.map({ $0.key != key || $0.id != id }) ?? true, out.count < 1_000_000 else {
                throw AssetPatchError(.http, "\(location.shown): a listing of uploads that does not advance")
            }
            marker = (key, id)
        } while marker != nil
        return out
    }

    func listParts(_ key: String, uploadID: String) throws -> [Part] {
        var out: [Part] = []
        var after = 0
        while true {
            let query = "max-parts=1000&part-number-marker=\(after)&uploadId=" + ObjectStore.encode(uploadID, slash: true)
            let r = try request("GET", key, query: query, limit: 16 << 20)
            try expect(r, [200], "GET (list parts)", key)
            for item in XMLText.all("Part", in: r.body) {
                guard let n = XMLText.first("PartNumber", in: item).flatMap({ Int($0) }),
                      let etag = XMLText.first("ETag", in: item).map(XMLText.unescape),
                      let size = XMLText.first("Size", in: item).flatMap({ Int64($0) }) else { continue }
                out.append(Part(number: n, etag: etag, size: size))
            }
            guard XMLText.first("IsTruncated", in: r.body) == "true",
                  let next = XMLText.first("NextPartNumberMarker", in: r.body).flatMap({ Int($0) }), next > after, next <= 10_000 else { break }
            after = next
        }
        return out
    }
}
