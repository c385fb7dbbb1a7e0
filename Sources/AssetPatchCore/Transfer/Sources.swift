/// The places one repository is served from: `manifest_url` (the primary) and the host's
/// `mirrors`, each the URL of the same head on another host. Everything but the head is named
/// by its hash and checked against the signed head, so any source is an untrusted,
/// interchangeable source of bytes: a file's counterpart on a mirror is the same path relative
/// to the mirror's head as it is relative to the head it was found through.
///
/// One value per update, check or group fetch. A source that fails (refuses, black-holes,
/// answers an error or HTML, answers a range wrongly, sends bytes that fail a check) is demoted
/// for the rest of it and its work goes to the next; when every source is demoted they are all
/// tried again, in order. Each source's last result is kept for `status`.
package final class Sources: @unchecked Sendable {  // `entries` is only touched with the lock held
    package struct Entry: Sendable {
        package let head: Location
        /// The head's URL after redirects, once fetched in this update.
        package var finalHead: String?
        /// Why it takes no more work in this update.
        package var demoted: String?
        package var requests = 0
        package var failures = 0
        /// Body bytes it delivered in this update.
        package var bytes: UInt64 = 0
        /// Its last result, for messages and `status`.
        package var last = "not asked"
        /// Its head was the one this update took.
        package var servedHead = false
    }

    private let entries: Locked<[Entry]>
    /// A source that sent nothing for this long has its work started on the next one too
    /// (0: failover only after a failure).
    package let hedgeMs: UInt64
    let log: (LogLevel, String) -> Void

    /// Mirrors of another kind than the primary (a local file for a remote primary, or the
    /// reverse) are left out, with a warning: a remote head may not make the client read local
    /// files, and a local repository's relative locations are files.
    package init(primary: Location, mirrors: [Location], hedgeMs: UInt64, log: @escaping (LogLevel, String) -> Void = { _, _ in }) {
        var all = [Entry(head: primary)]
        for m in mirrors where !all.contains(where: { $0.head == m }) {
            guard m.isFile == primary.isFile else {
                log(.warning, "mirror \(m.shown) left out: \(m.isFile ? "a local file" : "a remote URL") beside a \(primary.isFile ? "local" : "remote") manifest_url")
                continue
            }
            all.append(Entry(head: m))
        }
        entries = Locked(all)
        self.hedgeMs = hedgeMs
        self.log = log
    }

    package var count: Int { entries.withLock { $0.count } }
    package var snapshot: [Entry] { entries.withLock { $0 } }

    /// The source's name in messages: its head's URL without credentials or query.
    package func label(_ i: Int) -> String { entries.withLock { $0[i].head.shown } }

    func head(_ i: Int) -> Location { entries.withLock { $0[i].head } }

    /// The sources that take work now, in order.
    func usable() -> [Int] {
        entries.withLock { e in e.indices.filter { e[$0].demoted == nil } }
    }

    /// At the start of an attempt (a retry after every source failed): when every source is
    /// demoted, all of them take work again, in order. Within an attempt a demoted source
    /// gets no further request.
    func revive() {
        let all = entries.withLock { e -> Bool in
            guard !e.isEmpty, e.allSatisfy({ $0.demoted != nil }) else { return false }
            for i in e.indices { e[i].demoted = nil }
            return true
        }
        if all { log(.info, "every source failed; trying them again in order") }
    }


    func isUsable(_ i: Int) -> Bool { entries.withLock { $0[i].demoted == nil } }

    /// Takes a demoted source back (it answered after all).
    func restore(_ i: Int) { entries.withLock { $0[i].demoted = nil } }

    /// Takes the source out of this update's work, saying why once.
    func demote(_ i: Int, _ why: String) {
        let first = entries.withLock { e -> Bool in
            e[i].failures += 1
            e[i].last = why
            if e[i].demoted != nil { return false }
            e[i].demoted = why
            return true
        }
        if first && count > 1 { log(.warning, "source \(label(i)) demoted for this update: \(why)") }
    }

    func started(_ i: Int) { entries.withLock { $0[i].requests += 1 } }

    func delivered(_ i: Int, bytes: UInt64, _ result: String? = nil) {
        entries.withLock { e in
            e[i].bytes += bytes
            if let result { e[i].last = result }
        }
    }

    func servedHead(_ i: Int, finalURL: String, _ result: String) {
        entries.withLock { e in
            e[i].finalHead = finalURL
            e[i].last = result
            e[i].servedHead = true
        }
    }

    /// Each source's counterpart of `location` (found through one source's head), by source:
    /// the same reference relative to that source's head (`../../archives/…` from a channel's
    /// head too), so a mirror laid out as the primary serves it at its own place. A location on
    /// no source's origin (an absolute archive URL on another host) is the same for all.
    func locations(for location: Location) -> [Location?] {
        let e = snapshot
        let url = location.url
        let origin = URLs.origin(url)
        // The base it was resolved against: the head this update took, else the same-origin
        // head sharing the longest directory with it.
        var bases: [String] = []
        if let f = e.first(where: { $0.servedHead })?.finalHead { bases.append(f) }
        bases += e.flatMap { [$0.finalHead, $0.head.url].compactMap { $0 } }
            .sorted { Sources.sharedDirectory($0, url) > Sources.sharedDirectory($1, url) }
        guard let reference = bases.lazy.filter({ URLs.origin($0) == origin }).compactMap({ Sources.relative(url, from: $0) }).first else {
            return Array(repeating: location, count: e.count)
        }
        return e.map { Location(URLs.resolve(reference, against: $0.finalHead ?? $0.head.url)) }
    }

    /// The source whose head this update took (`servedHead`).
    var served: Int? { entries.withLock { $0.firstIndex { $0.servedHead } } }

    /// The relative reference that resolves against `base` to `url` (same origin, however
    /// spelled), checked by resolving it; nil when there is none.
    static func relative(_ url: String, from base: String) -> String? {
        guard URLs.origin(url) == URLs.origin(base), let (_, path, tail) = split(url), let (_, basePath, _) = split(base) else { return nil }
        let dirs = basePath.split(separator: "/", omittingEmptySubsequences: false).dropLast().dropFirst()
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        var k = 0
        while k < dirs.count, k < parts.count - 1, dirs[dirs.startIndex + k] == parts[parts.startIndex + k] { k += 1 }
        var reference = String(repeating: "../", count: dirs.count - k) + parts.dropFirst(k).joined(separator: "/") + tail
        if reference.isEmpty || reference.hasPrefix("/") || URLs.rawScheme(reference) != nil || reference.hasPrefix("?") { reference = "./" + reference }
        // The same origin however spelled (case, a default port written out), then the same path.
        guard let back = split(URLs.resolve(reference, against: base)), back.1 == path, back.2 == tail else { return nil }
        return reference
    }

    /// Path segments the two URLs' directories share (0 across origins).
    static func sharedDirectory(_ a: String, _ b: String) -> Int {
        guard URLs.origin(a) == URLs.origin(b), let (_, pa, _) = split(a), let (_, pb, _) = split(b) else { return -1 }
        let x = pa.split(separator: "/").dropLast(), y = pb.split(separator: "/").dropLast()
        return zip(x, y).prefix { $0 == $1 }.count
    }

    /// "scheme://authority", the path from its "/", and the query and fragment.
    private static func split(_ url: String) -> (String, Substring, Substring)? {
        guard let scheme = URLs.rawScheme(url) else { return nil }
        let rest = url.dropFirst(scheme.count + 1)
        guard rest.hasPrefix("//") else { return nil }
        let afterSlashes = rest.dropFirst(2)
        guard let slash = afterSlashes.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }), afterSlashes[slash] == "/" else { return nil }
        let cut = afterSlashes[slash...].firstIndex(where: { $0 == "?" || $0 == "#" }) ?? afterSlashes.endIndex
        return (String(url[..<slash]), afterSlashes[slash..<cut], afterSlashes[cut...])
    }
}
