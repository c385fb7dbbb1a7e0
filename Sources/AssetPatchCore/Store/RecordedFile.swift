import Glibc

/// One element of a release record's `files`: `{"path":…,"size":…,"sha256":…}`, and
/// `"group":…` when the file is not in the base group.
///
/// A record lists every file of its release, and an update reads several records: at 100,000
/// files, parsing each element into a JSON tree and looking its fields up was half of a small
/// update's time. `read(_:)` of an element's text reads the exact form `ReleaseRecord.serialize`
/// writes in one pass; any other form of the same element (another writer's spacing, key order,
/// escapes) is read from its JSON, with the same checks.
enum RecordedFile {
    /// The file an element's text names in the form `serialize` writes; nil for any other form
    /// (which may still be a valid element: read its JSON then).
    static func read(_ text: UnsafeRawBufferPointer) -> ManifestFile? {
        guard let (file, length) = read(prefixOf: text), length == text.count else { return nil }
        return file
    }

    /// The file named by an element in the form `serialize` writes at the start of `text`, and
    /// the element's length; nil when the element there is in any other form or not whole in
    /// `text`. What it reads is valid JSON: its string is checked as JSON's (no control
    /// character, valid UTF-8), and its numbers are digits without a leading zero.
    static func read(prefixOf text: UnsafeRawBufferPointer) -> (ManifestFile, Int)? {
        var i = 0
        func literal(_ s: StaticString) -> Bool {
            let n = s.utf8CodeUnitCount
            guard i + n <= text.count, memcmp(text.baseAddress! + i, s.utf8Start, n) == 0 else { return false }
            i += n
            return true
        }
        // Digits without a sign, fraction, exponent or leading zero, and few enough not to overflow.
        func integer() -> UInt64? {
            let start = i
            var v: UInt64 = 0
            while i < text.count, text[i] >= 48, text[i] <= 57, i - start < 18 {
                v = v * 10 + UInt64(text[i] - 48)
                i += 1
            }
            guard i > start, i == text.count || text[i] < 48 || text[i] > 57, text[start] != 48 || i == start + 1 else { return nil }
            return v
        }
        guard literal("{\"path\":\"") else { return nil }
        let pathStart = i
        var high: UInt8 = 0
        while i < text.count, text[i] != UInt8(ascii: "\""), text[i] != UInt8(ascii: "\\"), text[i] >= 0x20 {
            high |= text[i]
            i += 1
        }
        guard i < text.count, text[i] == UInt8(ascii: "\"") else { return nil }
        let pathBytes = UnsafeRawBufferPointer(rebasing: text[pathStart..<i])
        guard high < 0x80 || UTF8Check.isValid(pathBytes) else { return nil }
        let path = String(decoding: pathBytes, as: UTF8.self)
        guard literal("\",\"size\":"), let size = integer(), literal(",\"sha256\":\""), i + 64 <= text.count,
              let digest = Sha256(hexDigits: UnsafeRawBufferPointer(rebasing: text[i..<(i + 64)])) else { return nil }
        i += 64
        var group: UInt64 = 0
        guard literal("\"") else { return nil }
        if literal(",\"group\":") {
            guard let g = integer() else { return nil }
            group = g
        }
        guard literal("}"), let g = UInt16(exactly: group) else { return nil }
        return (ManifestFile(path: path, size: size, digest: digest, group: g), i)
    }

    /// The file an element parsed as JSON names; nil when it is not one (a field missing or
    /// of another type, a size below 0, a digest not 64 hex digits, a group beyond 65,535).
    static func read(_ f: JSON) -> ManifestFile? {
        guard let p = f["path"]?.string, let size = f["size"]?.int64, size >= 0,
              let sha = f["sha256"]?.string.flatMap(Sha256.init(hex:)), let group = UInt16(exactly: f["group"]?.int64 ?? 0) else { return nil }
        return ManifestFile(path: p, size: UInt64(size), digest: sha, group: group)
    }
}
