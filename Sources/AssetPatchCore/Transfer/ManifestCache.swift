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

/// Manifests kept for conditional requests, newest first, each with the validators it came with
/// (only validators `Validators.reusable` accepted).
///
/// Several copies, because a CDN's edges are not all in the same state: up to its max-age times
/// its cache tiers, one edge serves the new manifest and another the old, and a client may meet
/// both in turn. Sending every kept ETag (`If-None-Match` takes a list) lets either edge answer
/// 304, naming the copy it matched in its own ETag, instead of sending its manifest again.
struct ManifestCache {
    struct Entry {
        var finalURL: String
        var validators: Validators
        var bytes: [UInt8]
    }

    var url: String
    var entries: [Entry]

    /// At most this many copies, and this many bytes in all (the newest always stays).
    static let maxEntries = 4
    static let maxBytes = 64 << 20

    func encode() -> [UInt8] {
        let items: [JSON] = entries.map { e in
            var pairs: [(String, JSON)] = [("final_url", .string(e.finalURL)), ("length", .int(Int64(e.bytes.count)))]
            if let etag = e.validators.etag { pairs.append(("etag", .string(etag))) }
            if let lastModified = e.validators.lastModified { pairs.append(("last_modified", .string(lastModified))) }
            return .object(pairs)
        }
        var out = Array((JSON.object([("format", .int(2)), ("url", .string(url)), ("entries", .array(items))]).serialized() + "\n").utf8)
        for e in entries { out += e.bytes }
        return out
    }

    /// The cache file; one of another format (a single copy, as up to 0.3 kept it) reads as
    /// that one copy.
    static func decode(_ data: [UInt8]) -> ManifestCache? {
        guard let nl = data.firstIndex(of: 0x0A), let json = try? JSONParser.parse(Array(data[..<nl])),
              let url = json["url"]?.string else { return nil }
        var at = nl + 1
        guard json["format"]?.int64 == 2, let items = json["entries"]?.array else {
            guard let finalURL = json["final_url"]?.string else { return nil }
            let v = Validators(etag: json["etag"]?.string, lastModified: json["last_modified"]?.string)
            return ManifestCache(url: url, entries: [Entry(finalURL: finalURL, validators: v, bytes: Array(data[at...]))])
        }
        var entries: [Entry] = []
        for item in items {
            guard let finalURL = item["final_url"]?.string, let length = item["length"]?.int64, length >= 0,
                  at + Int(length) <= data.count else { return nil }
            let v = Validators(etag: item["etag"]?.string, lastModified: item["last_modified"]?.string)
            entries.append(Entry(finalURL: finalURL, validators: v, bytes: Array(data[at..<(at + Int(length))])))
            at += Int(length)
        }
        return ManifestCache(url: url, entries: entries)
    }

    /// The request headers that ask for the manifest only if it changed: every copy's ETag when
    /// each has one (servers compare ETags first), else the newest copy's validator alone.
    var conditionalHeaders: [String] {
        guard let newest = entries.first else { return [] }
        if entries.allSatisfy({ $0.validators.etag != nil }) {
            return ["If-None-Match: " + entries.map { $0.validators.etag! }.joined(separator: ", ")]
        }
        if let etag = newest.validators.etag { return ["If-None-Match: \(etag)"] }
        if let lastModified = newest.validators.lastModified { return ["If-Modified-Since: \(lastModified)"] }
        return []
    }

    /// The copy a 304 answered for: the one whose ETag the response names (compared weakly, as
    /// If-None-Match is), or the only one asked about. nil when it can't be told.
    func match(_ head: ResponseHead) -> Entry? {
        func opaque(_ tag: String) -> String { tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag }
        if let etag = head.header("ETag"), let e = entries.first(where: { $0.validators.etag.map(opaque) == opaque(etag) }) {
            return e
        }
        let asked = entries.allSatisfy { $0.validators.etag != nil } ? entries : Array(entries.prefix(1))
        return asked.count == 1 ? asked[0] : nil
    }

    /// Keeps `entry` as the newest copy: a copy with the same validators goes, and the oldest
    /// beyond the limits.
    mutating func insert(_ entry: Entry) {
        entries.removeAll { $0.validators == entry.validators || $0.bytes == entry.bytes }
        entries.insert(entry, at: 0)
        var total = 0
        var kept: [Entry] = []
        for e in entries where kept.count < ManifestCache.maxEntries && (kept.isEmpty || total + e.bytes.count <= ManifestCache.maxBytes) {
            kept.append(e)
            total += e.bytes.count
        }
        entries = kept
    }
}

extension ManifestCache {
    /// The manifests `store` keeps for `url`, if any has a validator.
    static func load(from store: Store, url: String) -> ManifestCache? {
        guard let bytes = try? FS.readFile(store.manifestCachePath, limit: 512 << 20, followLinks: false), let m = decode(bytes), m.url == url,
              !m.conditionalHeaders.isEmpty else { return nil }
        return m
    }

    /// Keeps the manifests for the next conditional request. Failing to write them only costs a 200.
    func save(to store: Store) {
        try? FS.writeAtomically(store.manifestCachePath, encode())
    }

    static func drop(from store: Store) { try? FS.unlink(store.manifestCachePath) }
}
