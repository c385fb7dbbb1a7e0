import Glibc

/// An S3-compatible bucket (AWS S3, R2, GCS interoperability, MinIO, Ceph...), read and written
/// with requests libcurl signs (AWS Signature Version 4, `CURLOPT_AWS_SIGV4`). Only what
/// publishing needs: objects put (from a file, with its sha256 signed and kept as metadata, and
/// optionally conditional), read, described, deleted and listed.
package final class ObjectStore {
    package struct Location: Sendable, Equatable {
        /// Scheme and host (and port) of the service, e.g. "https://s3.eu-west-1.amazonaws.com".
        package var endpoint: String
        package var region: String
        package var bucket: String
        /// The repository's folder in the bucket: "" or "a/b/" (ends in "/").
        package var prefix: String
        /// Path-style addressing (`endpoint/bucket/key`), as most S3-compatible stores want;
        /// otherwise virtual-hosted (`bucket.host/key`), as AWS prefers.
        package var pathStyle: Bool

        /// `s3://bucket/prefix`, with the endpoint and region given (nil: AWS's for the region).
        package static func parse(_ url: String, endpoint: String?, region: String?, pathStyle: Bool?) throws -> Location {
            guard url.hasPrefix("s3://") else { throw AssetPatchError(.argument, "\(url): not an s3://BUCKET/PREFIX URL") }
            let rest = url.dropFirst(5)
            let bucket = String(rest.prefix { $0 != "/" })
            guard bucket.count >= 3, bucket.count <= 63,
                  bucket.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" || $0 == "." }) else {
                throw AssetPatchError(.argument, "\(url): \"\(bucket)\" is not a bucket name (3 to 63 of a-z, 0-9, '-', '.')")
            }
            var prefix = String(rest.dropFirst(bucket.count)).stripping("/")
            if !prefix.isEmpty { prefix += "/" }
            guard !prefix.split(separator: "/").contains(where: { $0 == ".." || $0 == "." }) else {
                throw AssetPatchError(.argument, "\(url): the prefix may not hold . or .. segments")
            }
            let region = region ?? "us-east-1"
            var end = endpoint ?? "https://s3.\(region).amazonaws.com"
            while end.hasSuffix("/") { end.removeLast() }
            guard end.hasPrefix("https://") || end.hasPrefix("http://") else {
                throw AssetPatchError(.argument, "--endpoint \(end): an http:// or https:// URL")
            }
            // A dotted bucket name fails TLS's name check as a host (bucket.s3...): path-style then.
            return Location(endpoint: end, region: region, bucket: bucket, prefix: prefix,
                            pathStyle: pathStyle ?? (endpoint != nil || bucket.contains(".")))
        }

        package var shown: String { "s3://\(bucket)/\(prefix)" }
    }

    /// One response: its status, headers (names in lower case) and body.
    package struct Response {
        package var status: Int
        package var headers: [(String, String)]
        package var body: [UInt8]

        package func header(_ name: String) -> String? { headers.last { $0.0 == name }?.1 }
        /// The service's error code from an XML error body ("PreconditionFailed", ...).
        package var errorCode: String? { XMLText.first("Code", in: body) }
        /// The sha256 an object was put with (`x-amz-meta-sha256`; GCS answers in its own names).
        package var keptSHA256: String? { header("x-amz-meta-sha256") ?? header("x-goog-meta-sha256") }
        /// Whether the object's ETag is something other than its MD5 even for one part: SSE-KMS
        /// and SSE-C objects (R2's are opaque, and not hex).
        package var etagIsNotMD5: Bool {
            header("x-amz-server-side-encryption").map { $0.hasPrefix("aws:kms") } == true
                || header("x-amz-server-side-encryption-customer-algorithm") != nil
        }
    }

    /// What a put may require of the object it replaces.
    package enum Condition: Sendable, Equatable {
        case none
        /// Only when there is no object there yet.
        case absent
        /// Only when the object is still the one with this ETag.
        case etag(String)
    }

    package let location: Location
    let credentials: (key: String, secret: String, token: String?)

    package init(_ location: Location, accessKey: String, secretKey: String, sessionToken: String? = nil) {
        self.location = location
        credentials = (accessKey, secretKey, sessionToken)
    }

    /// The credentials from the usual AWS environment variables.
    package static func fromEnvironment(_ location: Location) throws -> ObjectStore {
        func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        guard let key = env("AWS_ACCESS_KEY_ID"), let secret = env("AWS_SECRET_ACCESS_KEY") else {
            throw AssetPatchError(.argument, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for \(location.shown)")
        }
        return ObjectStore(location, accessKey: key, secretKey: secret, sessionToken: env("AWS_SESSION_TOKEN"))
    }

    // MARK: Objects

    /// The object's description; nil when there is none.
    package func head(_ key: String) throws -> Response? {
        let r = try request("HEAD", key)
        if r.status == 404 { return nil }
        try expect(r, [200], "HEAD", key)
        return r
    }

    /// The object's bytes (at most `limit`); nil when there is none.
    package func get(_ key: String, limit: Int = 64 << 20) throws -> (body: [UInt8], etag: String?)? {
        let r = try request("GET", key, limit: limit)
        if r.status == 404 { return nil }
        try expect(r, [200], "GET", key)
        return (r.body, r.header("etag"))
    }

    /// Puts the bytes of `file` (or `bytes`) at `key` with their MD5 (`Content-MD5`: the store
    /// refuses other bytes) and their sha256 (signed, and kept as metadata `x-amz-meta-sha256`);
    /// returns the new ETag. A failed condition is `.state`.
    @discardableResult
    package func put(_ key: String, file: String? = nil, bytes: [UInt8]? = nil, sha256: String, md5: String, contentType: String,
                     cacheControl: String?, acl: String? = nil, condition: Condition = .none) throws -> String? {
        var headers = ObjectStore.described(sha256: sha256, contentType: contentType, cacheControl: cacheControl, acl: acl)
            + ["Content-MD5: \(Base64.encode(Hex.decode(md5) ?? []))"]
        switch condition {
        case .none: break
        case .absent: headers.append("If-None-Match: *")
        case let .etag(e): headers.append("If-Match: \(e)")
        }
        let r = try request("PUT", key, headers: headers, payloadSHA256: sha256, upload: file.map { .file($0) } ?? .bytes(bytes ?? []))
        // If-Match on an object deleted meanwhile: 404. Both say it is not what was read.
        let changed = r.status == 412 || r.errorCode == "PreconditionFailed" || (r.status == 409 && r.errorCode == "ConditionalRequestConflict")
            || (r.status == 404 && condition != .none && condition != .absent)
        if changed {
            throw AssetPatchError(.state, "\(location.shown)\(key) changed since it was read (another publisher?): not replaced")
        }
        try expect(r, [200], "PUT", key)
        return r.header("etag")
    }

    /// What an object is created with: its sha256 kept as metadata, its type, its cache
    /// lifetime and ACL.
    static func described(sha256: String, contentType: String, cacheControl: String?, acl: String?) -> [String] {
        var headers = ["x-amz-meta-sha256: \(sha256)", "Content-Type: \(contentType)"]
        if let acl { headers.append("x-amz-acl: \(acl)") }
        if let cacheControl { headers.append("Cache-Control: \(cacheControl)") }
        return headers
    }

    package func delete(_ key: String) throws {
        let r = try request("DELETE", key)
        try expect(r, [200, 204, 404], "DELETE", key)
    }

    /// Every object under the repository's prefix plus `under` (ListObjectsV2, page by page):
    /// keys relative to the prefix, with their sizes and when they were last written (Unix
    /// seconds; 0 when the store does not say).
    package func list(under: String = "") throws -> [(key: String, size: UInt64, modified: Int64)] {
        var out: [(String, UInt64, Int64)] = []
        var token: String?
        repeat {
            // In the order signing wants (sorted by name): libcurl signs the query as given.
            var query = ""
            if let t = token { query += "continuation-token=" + ObjectStore.encode(t, slash: true) + "&" }
            query += "list-type=2&prefix=" + ObjectStore.encode(location.prefix + under, slash: true)
            let r = try request("GET", "", query: query, bucketLevel: true, limit: 16 << 20)
            try expect(r, [200], "GET (list)", under)
            for item in XMLText.all("Contents", in: r.body) {
                guard let key = XMLText.first("Key", in: item).map(XMLText.unescape), key.hasPrefix(location.prefix) else { continue }
                out.append((String(key.dropFirst(location.prefix.count)), UInt64(XMLText.first("Size", in: item) ?? "") ?? 0,
                            XMLText.first("LastModified", in: item).flatMap(RFC3339.parse) ?? 0))
            }
            guard XMLText.first("IsTruncated", in: r.body) == "true" else { break }
            guard let next = XMLText.first("NextContinuationToken", in: r.body).map(XMLText.unescape) else {
                throw AssetPatchError(.http, "\(location.shown): a truncated listing without a continuation token")
            }
            token = next
        } while token != nil
        return out
    }

    func expect(_ r: Response, _ ok: [Int], _ method: String, _ key: String) throws {
        guard !ok.contains(r.status) else { return }
        let code = r.errorCode.map { " (\($0))" } ?? ""
        let status: Status = r.status == 403 || r.status == 401 ? .argument : .http
        // A bucket in another region: AWS says which.
        let region = r.header("x-amz-bucket-region").map { "; the bucket is in region \($0): give --region \($0)" } ?? ""
        // What the store asks to be tried again later, by status and by its own code.
        let again = r.status >= 500 || r.status == 429 || ["RequestTimeout", "SlowDown", "InternalError"].contains(r.errorCode ?? "")
        throw AssetPatchError(status, "\(method) \(location.shown)\(key): HTTP \(r.status)\(code)\(region)", transient: again)
    }

    /// RFC 3986 unreserved characters pass; `/` too unless `slash`.
    static func encode(_ s: String, slash: Bool) -> String {
        var out = ""
        for b in s.utf8 {
            let c = Character(UnicodeScalar(b))
            if (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || "-._~".contains(c) || (b == 0x2F && !slash) {
                out.append(c)
            } else {
                let hex = String(b, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return out
    }
}
