/// The few URL operations the updater needs: the scheme, file:// paths, and RFC 3986
/// reference resolution for relative archive URLs.
package enum URLs {
    package enum Scheme: Sendable { case http, https, file }

    /// The scheme, lowercased, if the string starts with one (`[A-Za-z][A-Za-z0-9+.-]*:`).
    package static func rawScheme(_ url: String) -> String? {
        func isAlpha(_ c: UInt8) -> Bool { (c | 0x20) >= 97 && (c | 0x20) <= 122 }
        let b = Array(url.utf8.prefix(64))
        guard let first = b.first, isAlpha(first) else { return nil }
        for i in 1..<b.count {
            let c = b[i]
            if c == UInt8(ascii: ":") { return String(decoding: b[0..<i], as: UTF8.self).lowercased() }
            let ok = isAlpha(c) || (c >= 48 && c <= 57) || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")
            if !ok { return nil }
        }
        return nil
    }

    package static func scheme(_ url: String) -> Scheme? {
        switch rawScheme(url) {
        case "http": .http
        case "https": .https
        case "file": .file
        default: nil
        }
    }

    /// The local path of a `file://` URL (`file:///a/b`, `file://localhost/a/b`), percent-decoded.
    package static func filePath(_ url: String) -> String? {
        guard scheme(url) == .file else { return nil }
        var rest = Substring(url.dropFirst(5))  // "file:"
        if rest.hasPrefix("//") {
            rest = rest.dropFirst(2)
            guard let slash = rest.firstIndex(of: "/") else { return nil }
            let host = rest[..<slash]
            if !(host.isEmpty || host.lowercased() == "localhost") { return nil }
            rest = rest[slash...]
        }
        guard rest.hasPrefix("/") else { return nil }
        if let q = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<q] }
        return percentDecode(String(rest))
    }

    package static func percentDecode(_ s: String) -> String? {
        var out: [UInt8] = []
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "%") {
                guard i + 2 < b.count, let v = UInt8(String(decoding: b[i + 1...i + 2], as: UTF8.self), radix: 16) else { return nil }
                if v == 0 { return nil }
                out.append(v)
                i += 3
            } else {
                out.append(b[i])
                i += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// A `file://` URL for an absolute path, percent-encoding what a URL can't hold as is.
    package static func fileURL(forPath path: String) -> String {
        var out = "file://"
        for byte in path.utf8 {
            let c = Unicode.Scalar(byte)
            if byte < 128 && (c.properties.isAlphabetic || ("0"..."9").contains(c) || "/-._~@+,=:".unicodeScalars.contains(c)) {
                out.unicodeScalars.append(c)
            } else {
                out += "%" + Hex.encode([byte]).uppercased()
            }
        }
        return out
    }

    /// Resolves `reference` against `base` (RFC 3986 section 5.2, for hierarchical URLs).
    package static func resolve(_ reference: String, against base: String) -> String {
        if rawScheme(reference) != nil { return reference }
        guard let baseScheme = rawScheme(base) else { return reference }
        var baseRest = Substring(base.dropFirst(baseScheme.count + 1))
        if let cut = baseRest.firstIndex(where: { $0 == "?" || $0 == "#" }) { baseRest = baseRest[..<cut] }
        var authority: Substring = ""
        var basePath = baseRest
        if baseRest.hasPrefix("//") {
            let afterSlashes = baseRest.dropFirst(2)
            let end = afterSlashes.firstIndex(of: "/") ?? afterSlashes.endIndex
            authority = baseRest[..<end]
            basePath = afterSlashes[end...]
        }
        let prefix = String(base.prefix(baseScheme.count)) + ":" + authority
        if reference.hasPrefix("//") { return String(base.prefix(baseScheme.count)) + ":" + reference }
        if reference.isEmpty { return prefix + basePath }
        var refPath = Substring(reference)
        var tail: Substring = ""
        if let cut = refPath.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            tail = refPath[cut...]
            refPath = refPath[..<cut]
        }
        let merged: String
        if refPath.hasPrefix("/") {
            merged = String(refPath)
        } else if refPath.isEmpty {
            merged = String(basePath)
        } else {
            let dir = basePath.lastIndex(of: "/").map { basePath[...$0] } ?? "/"
            merged = String(dir) + refPath
        }
        return prefix + removeDotSegments(merged) + tail
    }

    static func removeDotSegments(_ path: String) -> String {
        var out: [Substring] = []
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        for (i, part) in parts.enumerated() {
            let last = i == parts.count - 1
            if part == "." {
                if last { out.append("") }
            } else if part == ".." {
                if out.count > 1 { out.removeLast() }
                if last { out.append("") }
            } else {
                out.append(part)
            }
        }
        let joined = out.joined(separator: "/")
        return joined.hasPrefix("/") || joined.isEmpty ? joined : "/" + joined
    }

    /// The origin (RFC 6454): scheme, host and port, lowercased, the default port written out
    /// ("https://cdn.example:443"); "file://" for every local file. nil for a URL without a
    /// scheme this library reads.
    package static func origin(_ url: String) -> String? {
        guard let scheme = rawScheme(url), let kind = URLs.scheme(url) else { return nil }
        if kind == .file { return "file://" }
        var rest = Substring(url.dropFirst(scheme.count + 1))
        guard rest.hasPrefix("//") else { return nil }
        rest = rest.dropFirst(2)
        var authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host = authority, port = kind == .https ? "443" : "80"
        // The port follows the last ':' outside an IPv6 literal's brackets.
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") {
            host = authority[..<colon]
            let p = authority[authority.index(after: colon)...]
            if !p.isEmpty { port = String(p.drop { $0 == "0" }.isEmpty ? "0" : p.drop { $0 == "0" }) }
        }
        return "\(scheme)://\(host.lowercased()):\(port)"
    }

    /// The URL without user information, query or fragment, for messages and logs.
    package static func redacted(_ url: String) -> String {
        var s = Substring(url)
        if let cut = s.firstIndex(where: { $0 == "?" || $0 == "#" }) { s = s[..<cut] }
        if let colon = s.firstIndex(of: ":"), s[colon...].hasPrefix("://") {
            let host = s.index(colon, offsetBy: 3)
            if let at = s[host...].firstIndex(of: "@"), !s[host..<at].contains("/") {
                return String(s[..<host]) + String(s[s.index(after: at)...])
            }
        }
        return String(s)
    }
}

/// A URL the client reads from, parsed once: a local file, or an http(s) resource.
package enum Location: Sendable, Equatable {
    case file(path: String, url: String)
    case http(url: String)

    /// nil for schemes other than http, https and file, and for file URLs of another host.
    package init?(_ url: String) {
        switch URLs.scheme(url) {
        case .http, .https: self = .http(url: url)
        case .file:
            guard let path = URLs.filePath(url) else { return nil }
            self = .file(path: path, url: url)
        case nil: return nil
        }
    }

    package var url: String {
        switch self {
        case let .file(_, url), let .http(url): url
        }
    }

    package var isFile: Bool {
        if case .file = self { return true }
        return false
    }

    /// The URL for messages and logs (no credentials, query or fragment).
    package var shown: String { URLs.redacted(url) }
}
