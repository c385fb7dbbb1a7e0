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
    }

    private let entries: Locked<[Entry]>
    /// A source that sent nothing for this long has its work started on the next one too
    /// (0: failover only after a failure).
    package let hedgeMs: UInt64
    let log: (LogLevel, String) -> Void

    package init(primary: Location, mirrors: [Location], hedgeMs: UInt64, log: @escaping (LogLevel, String) -> Void = { _, _ in }) {
        var all = [Entry(head: primary)]
        for m in mirrors where !all.contains(where: { $0.head == m }) { all.append(Entry(head: m)) }
        entries = Locked(all)
        self.hedgeMs = hedgeMs
        self.log = log
    }

    package var count: Int { entries.withLock { $0.count } }
    package var snapshot: [Entry] { entries.withLock { $0 } }

    /// The source's name in messages: its head's URL without credentials or query.
    package func label(_ i: Int) -> String { entries.withLock { $0[i].head.shown } }

    func head(_ i: Int) -> Location { entries.withLock { $0[i].head } }

    /// The sources that take work now, in order; when every one is demoted, all of them again.
    func usable() -> [Int] {
        entries.withLock { e in
            let ok = e.indices.filter { e[$0].demoted == nil }
            if !ok.isEmpty || e.isEmpty { return ok }
            for i in e.indices { e[i].demoted = nil }
            return Array(e.indices)
        }
    }

    func isUsable(_ i: Int) -> Bool { entries.withLock { $0[i].demoted == nil } }

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
        }
    }

    /// Each source's counterpart of `location` (found through one source's head), by source;
    /// nil where it has none. A location outside every source's directory (an absolute URL on
    /// another host) is the same for all: only the first source names it.
    func locations(for location: Location) -> [Location?] {
        let e = snapshot
        func directory(_ url: String) -> String {
            var s = Substring(url)
            if let cut = s.firstIndex(where: { $0 == "?" || $0 == "#" }) { s = s[..<cut] }
            return s.lastIndex(of: "/").map { String(s[...$0]) } ?? String(s)
        }
        let url = location.url
        var suffix: Substring?
        search: for entry in e {
            for head in [entry.finalHead, entry.head.url].compactMap({ $0 }) {
                let dir = directory(head)
                if url.hasPrefix(dir) {
                    suffix = url.dropFirst(dir.count)
                    break search
                }
            }
        }
        guard let suffix else { return [location] + Array(repeating: nil, count: e.count - 1) }
        var seen = Set<String>()
        return e.map { entry in
            let mapped = directory(entry.finalHead ?? entry.head.url) + suffix
            guard seen.insert(mapped).inserted else { return nil }
            return Location(mapped)
        }
    }
}
