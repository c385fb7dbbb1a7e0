/// A JSON value. Objects keep their key order (the publisher writes stable, readable output).
package enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's literal text, kept exact; see `int64`.
    case number(String)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    package static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case let (.bool(x), .bool(y)): x == y
        case let (.number(x), .number(y)): x == y
        case let (.string(x), .string(y)): x == y
        case let (.array(x), .array(y)): x == y
        case let (.object(x), .object(y)): x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    package static func int(_ v: Int64) -> JSON { .number(String(v)) }

    package subscript(key: String) -> JSON? {
        guard case let .object(pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }

    /// The value as a whole number when it is one that fits in Int64 (no fraction, no exponent).
    package var int64: Int64? {
        guard case let .number(text) = self else { return nil }
        return Int64(text)
    }

    /// An object's members in order.
    package var objectPairs: [(String, JSON)]? {
        guard case let .object(pairs) = self else { return nil }
        return pairs
    }

    /// A number's text as written (fractions and exponents included).
    package var numberText: String? {
        guard case let .number(text) = self else { return nil }
        return text
    }

    package var string: String? {
        guard case let .string(s) = self else { return nil }
        return s
    }

    package var array: [JSON]? {
        guard case let .array(a) = self else { return nil }
        return a
    }

    package var isObject: Bool {
        if case .object = self { return true }
        return false
    }
}

extension JSON {
    /// Serialises the value; `indent` > 0 pretty-prints with that many spaces per level.
    package func serialized(indent: Int = 0) -> String {
        var out = ""
        write(into: &out, indent: indent, level: 0)
        return out
    }

    private func write(into out: inout String, indent: Int, level: Int) {
        let pretty = indent > 0
        func newline(_ l: Int) {
            if pretty { out += "\n" + String(repeating: " ", count: indent * l) }
        }
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .number(n): out += n
        case let .string(s): JSON.quote(s, into: &out)
        case let .array(items):
            if items.isEmpty { out += "[]"; return }
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                newline(level + 1)
                item.write(into: &out, indent: indent, level: level + 1)
            }
            newline(level)
            out += "]"
        case let .object(pairs):
            if pairs.isEmpty { out += "{}"; return }
            out += "{"
            for (i, (k, v)) in pairs.enumerated() {
                if i > 0 { out += "," }
                newline(level + 1)
                JSON.quote(k, into: &out)
                out += pretty ? ": " : ":"
                v.write(into: &out, indent: indent, level: level + 1)
            }
            newline(level)
            out += "}"
        }
    }

    /// Whether a byte of UTF-8 text stands for itself inside a JSON string.
    static func needsNoEscape(_ b: UInt8) -> Bool { b >= 0x20 && b != 0x22 && b != 0x5C }

    /// `quote(_:into:)` appending bytes: a string that needs no escape is copied as it is.
    static func quote(_ s: String, into out: inout [UInt8]) {
        let copied: Bool? = s.utf8.withContiguousStorageIfAvailable { p in
            guard p.allSatisfy(needsNoEscape) else { return false }
            out.append(0x22)
            out.append(contentsOf: p)
            out.append(0x22)
            return true
        }
        if copied != true {
            var text = ""
            quote(s, into: &text)
            out += text.utf8
        }
    }

    static func quote(_ s: String, into out: inout String) {
        out += "\""
        // Most strings (paths, digests) need no escape: appended whole.
        if s.utf8.allSatisfy(needsNoEscape) {
            out += s
            out += "\""
            return
        }
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let h = Hex.encode([UInt8(u.value)])
                    out += "\\u00" + h
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        out += "\""
    }
}

extension JSON {
    /// The object with `key` set to `value` (in place when present, appended otherwise).
    package func setting(_ key: String, _ value: JSON) -> JSON {
        guard case var .object(pairs) = self else { return self }
        if let i = pairs.firstIndex(where: { $0.0 == key }) { pairs[i].1 = value } else { pairs.append((key, value)) }
        return .object(pairs)
    }

    /// The object without `key`.
    package func removing(_ key: String) -> JSON {
        guard case let .object(pairs) = self else { return self }
        return .object(pairs.filter { $0.0 != key })
    }
}
