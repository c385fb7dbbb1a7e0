/// What a manifest's first bytes say before it is read whole: the version, as `publish` writes
/// it (`format`, `package`, then `version`), in a plain manifest or inside a DSSE envelope's
/// base64 payload. Unverified: a hint decides only whether a manifest is read and judged in
/// full (`Updater.evaluate`), never what is accepted.
package enum ManifestHints {
    /// The top-level `"version": N` among the first bytes; nil when they do not name one.
    package static func version(_ prefix: [UInt8]) -> Int64? {
        var text = prefix
        if let at = prefix.firstIndex(of: Array(#""payload""#.utf8)) {
            // The envelope's payload: its base64 as far as the prefix goes, whole quads only.
            var i = skipping(at + 9, in: prefix, [0x20, 0x0A, 0x0D, 0x09, 0x3A])
            guard i < prefix.count, prefix[i] == UInt8(ascii: "\"") else { return nil }
            i += 1
            var b64: [UInt8] = []
            while i < prefix.count, prefix[i] != UInt8(ascii: "\"") {
                b64.append(prefix[i])
                i += 1
            }
            b64.removeLast(b64.count % 4)
            guard let decoded = Base64.decode(String(decoding: b64, as: UTF8.self)) else { return nil }
            text = decoded
        }
        guard let at = text.firstIndex(of: Array(#""version""#.utf8)) else { return nil }
        var i = skipping(at + 9, in: text, [0x20, 0x0A, 0x0D, 0x09])
        guard i < text.count, text[i] == UInt8(ascii: ":") else { return nil }
        i = skipping(i + 1, in: text, [0x20, 0x0A, 0x0D, 0x09])
        var value: Int64 = 0
        var digits = 0
        while i < text.count, text[i] >= 0x30, text[i] <= 0x39, digits < 18 {
            value = value * 10 + Int64(text[i] - 0x30)
            digits += 1
            i += 1
        }
        // The number must end inside the prefix: a cut one could be a smaller number.
        guard digits > 0, i < text.count, text[i] < 0x30 || text[i] > 0x39 else { return nil }
        return value
    }

    private static func skipping(_ start: Int, in bytes: [UInt8], _ set: [UInt8]) -> Int {
        var i = start
        while i < bytes.count, set.contains(bytes[i]) { i += 1 }
        return i
    }
}
