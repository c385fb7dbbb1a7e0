import Glibc

/// One HTTP response's head, as the header callback saw it (the last response after redirects).
package struct ResponseHead: Sendable {
    package var status = 0
    package var headers: [(String, String)] = []
    /// The URL that answered, after redirects.
    package var effectiveURL = ""

    package func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.last { $0.0.lowercased() == lower }?.1
    }

    /// The Content-Length, when the server announced one.
    package var contentLength: UInt64? { header("Content-Length").flatMap { UInt64($0.trimmingCharacters(in: " \t")) } }
}

/// `Retry-After` (RFC 9110 section 10.2.3): delay-seconds or an HTTP-date (IMF-fixdate).
enum RetryAfter {
    static func milliseconds(_ value: String, now: Int64) -> UInt64? {
        let v = value.trimmingCharacters(in: " \t")
        if !v.isEmpty, v.utf8.count <= 10, v.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let s = UInt64(v) {
            return s * 1000
        }
        guard let date = HTTPDate.parse(v) else { return nil }
        return date > now ? UInt64(date - now) * 1000 : 0
    }
}

/// IMF-fixdate, the HTTP-date every current server sends: `Sun, 06 Nov 1994 08:49:37 GMT`.
enum HTTPDate {
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func parse(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int(parts[1]), let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3]) else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let h = Int(time[0]), let m = Int(time[1]), let s = Int(time[2]),
              (1...31).contains(day), (0...23).contains(h), (0...59).contains(m), (0...60).contains(s) else { return nil }
        return Int64(RFC3339.daysFromCivil(year, month + 1, day)) * 86400 + Int64(h * 3600 + m * 60 + min(s, 59))
    }
}

/// `Content-Range: bytes START-END/TOTAL` (RFC 9110 section 14.4).
enum ContentRange {
    static func parse(_ value: String) -> (start: UInt64, end: UInt64, total: UInt64)? {
        let v = value.trimmingCharacters(in: " ")
        guard v.hasPrefix("bytes ") else { return nil }
        let rest = v.dropFirst(6)
        guard let dash = rest.firstIndex(of: "-"), let slash = rest.firstIndex(of: "/"), dash < slash,
              let start = UInt64(rest[..<dash]), let end = UInt64(rest[rest.index(after: dash)..<slash]),
              let total = UInt64(rest[rest.index(after: slash)...]), start <= end, end < total else { return nil }
        return (start, end, total)
    }
}

extension String {
    package func trimmingCharacters(in set: String) -> String {
        let chars = Set(set.unicodeScalars)
        var scalars = Substring(self).unicodeScalars[...]
        while let f = scalars.first, chars.contains(f) { scalars.removeFirst() }
        while let l = scalars.last, chars.contains(l) { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }
}
