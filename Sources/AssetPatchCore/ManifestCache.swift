import Glibc

/// A response's validators (RFC 9110 section 8.8) that a later request may send back: in
/// `If-None-Match`/`If-Modified-Since` for the manifest, in `If-Range` for a resumed archive.
///
/// Static servers derive validators from a file's modification time, in whole seconds: nginx's
/// ETag is `"<mtime hex>-<size hex>"` and every server's Last-Modified has one-second
/// resolution. A file replaced within the second it was served, by one of the same size, keeps
/// those validators, so a client that sends them back is told "304 Not Modified" (or has a range
/// of the new file spliced onto the old) until the file changes again. This is git's "racy
/// git" problem, and RFC 9110 section 8.8.2.2 gives the test: a Last-Modified is a strong
/// validator only when it is at least one second before the response's Date. Any later write
/// happens after the response was generated, so in a later second than the Last-Modified: its
/// validators differ.
///
/// The rule: a response's validators are kept when its Last-Modified is at least one second
/// older than its Date; a Last-Modified without a Date that says so is racy. An ETag without any
/// Last-Modified is kept: the servers that derive ETags from modification times (nginx, Apache,
/// Caddy, lighttpd) send Last-Modified with them. Racy validators are dropped: the next request
/// is unconditional, and the next response, a second or more after the write, has safe ones.
struct Validators: Equatable {
    var etag: String?
    var lastModified: String?

    /// The response's validators when they are safe to send back; nil when it has none or they
    /// are racy.
    static func reusable(_ head: ResponseHead) -> Validators? {
        guard let v = any(head) else { return nil }
        return v.isRacy(date: head.header("Date")) ? nil : v
    }

    /// The response's validators, racy or not; nil when it has none.
    static func any(_ head: ResponseHead) -> Validators? {
        let v = Validators(etag: head.header("ETag"), lastModified: head.header("Last-Modified"))
        return v.etag == nil && v.lastModified == nil ? nil : v
    }

    /// Whether the validators may also describe a later version of the file (see the type).
    func isRacy(date: String?) -> Bool {
        guard let lastModified else { return false }
        guard let modified = HTTPDate.parse(lastModified), let date = date.flatMap(HTTPDate.parse) else { return true }
        return modified >= date
    }

    /// The strong validator for `If-Range` (RFC 9110 section 13.1.5): a strong ETag, else the
    /// Last-Modified date.
    var ifRange: String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }
}

/// A manifest kept for conditional requests: a small JSON header line, then the bytes. Kept only
/// with validators that `Validators.reusable` accepted.
struct ManifestCache {
    var url: String
    var finalURL: String
    var validators: Validators
    var bytes: [UInt8]

    func encode() -> [UInt8] {
        var pairs: [(String, JSON)] = [("url", .string(url)), ("final_url", .string(finalURL))]
        if let etag = validators.etag { pairs.append(("etag", .string(etag))) }
        if let lastModified = validators.lastModified { pairs.append(("last_modified", .string(lastModified))) }
        return Array((JSON.object(pairs).serialized() + "\n").utf8) + bytes
    }

    static func decode(_ data: [UInt8]) -> ManifestCache? {
        guard let nl = data.firstIndex(of: 0x0A), let json = try? JSONParser.parse(Array(data[..<nl])),
              let url = json["url"]?.string, let finalURL = json["final_url"]?.string else { return nil }
        return ManifestCache(url: url, finalURL: finalURL,
                             validators: Validators(etag: json["etag"]?.string, lastModified: json["last_modified"]?.string),
                             bytes: Array(data[(nl + 1)...]))
    }

    /// The request headers that ask for the manifest only if it changed: the ETag when there is
    /// one (servers compare it first), else the Last-Modified date.
    var conditionalHeaders: [String] {
        if let etag = validators.etag { return ["If-None-Match: \(etag)"] }
        if let lastModified = validators.lastModified { return ["If-Modified-Since: \(lastModified)"] }
        return []
    }
}

extension Store {
    var manifestCachePath: String { root + "/manifest-cache" }

    /// The last manifest fetched from `url`, if it is cached with a validator.
    func cachedManifest(url: String) -> ManifestCache? {
        guard let bytes = try? FS.readFile(manifestCachePath, limit: 256 << 20, followLinks: false), let m = ManifestCache.decode(bytes), m.url == url,
              !m.conditionalHeaders.isEmpty else { return nil }
        return m
    }

    /// Keeps a manifest for the next conditional request. Failing to write it only costs a 200.
    func cacheManifest(_ m: ManifestCache) {
        try? FS.writeAtomically(manifestCachePath, m.encode())
    }

    func dropCachedManifest() { try? FS.unlink(manifestCachePath) }
}
