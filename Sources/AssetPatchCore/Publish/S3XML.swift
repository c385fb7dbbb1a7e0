/// The few XML elements S3's answers are read for (errors, listings): their text, found by
/// name, never a general parser (an element's text holds no markup in these answers).
enum XMLText {
    static func all(_ name: String, in body: some Collection<UInt8>) -> [ArraySlice<UInt8>] {
        let bytes = Array(body)
        let open = Array("<\(name)>".utf8), close = Array("</\(name)>".utf8)
        var out: [ArraySlice<UInt8>] = []
        var i = 0
        while let s = bytes.firstIndex(of: open, from: i), let e = bytes.firstIndex(of: close, from: s + open.count) {
            out.append(bytes[(s + open.count)..<e])
            i = e + close.count
        }
        return out
    }

    static func first(_ name: String, in body: some Collection<UInt8>) -> String? {
        all(name, in: body).first.map { String(decoding: $0, as: UTF8.self) }
    }

    static func escape(_ s: String) -> String {
        s.replacingAll("&", "&amp;").replacingAll("<", "&lt;").replacingAll(">", "&gt;").replacingAll("\"", "&quot;")
    }

    /// The five named entities and numeric references (`&#34;`, `&#x22;`: some stores write a
    /// quoted ETag so); anything else is left as it is.
    static func unescape(_ s: String) -> String {
        let named: [(String, String)] = [("lt", "<"), ("gt", ">"), ("quot", "\""), ("apos", "'"), ("amp", "&")]
        let bytes = Array(s.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "&"), let end = bytes[i...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
                out.append(bytes[i])
                i += 1
                continue
            }
            let name = String(decoding: bytes[(i + 1)..<end], as: UTF8.self)
            var scalar: UnicodeScalar?
            if let n = named.first(where: { $0.0 == name }) {
                scalar = n.1.unicodeScalars.first
            } else if name.hasPrefix("#x") || name.hasPrefix("#X") {
                scalar = UInt32(name.dropFirst(2), radix: 16).flatMap(UnicodeScalar.init)
            } else if name.hasPrefix("#") {
                scalar = UInt32(name.dropFirst()).flatMap(UnicodeScalar.init)
            }
            guard let scalar else {
                out.append(bytes[i])
                i += 1
                continue
            }
            out += Array(String(Character(scalar)).utf8)
            i = end + 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension String {
    /// Without the leading and trailing characters `set` holds.
    func stripping(_ set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }

    /// Every `target` replaced (byte-wise: this module does without string processing).
    func replacingAll(_ target: String, _ replacement: String) -> String {
        let hay = Array(utf8), needle = Array(target.utf8)
        guard !needle.isEmpty else { return self }
        var out: [UInt8] = []
        var i = 0
        while i < hay.count {
            if i + needle.count <= hay.count && hay[i..<(i + needle.count)].elementsEqual(needle) {
                out += replacement.utf8
                i += needle.count
            } else {
                out.append(hay[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
