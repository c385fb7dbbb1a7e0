/// The one rule for resource names, manifest paths and archive entry names: relative,
/// `/`-separated, every component non-empty and not `.` or `..`, no `\`, no NUL, no drive
/// letter, valid UTF-8. Names that pass can be appended to a directory without escaping it
/// ("zip slip" and path traversal).
public enum ResourceName {
    public static let maxLength = 4096

    public static func isValid(_ name: String) -> Bool {
        var copy = name
        return copy.withUTF8 { isValid(UnsafeRawBufferPointer($0)) }
    }

    /// Validates raw bytes (the resolve fast path and zip entry names).
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        if n == 0 || n > maxLength { return false }
        if bytes[0] == UInt8(ascii: "/") { return false }
        // A drive letter ("C:x", "C:/x") names another root on Windows hosts.
        if n >= 2, bytes[1] == UInt8(ascii: ":"), (bytes[0] | 0x20) >= UInt8(ascii: "a"), (bytes[0] | 0x20) <= UInt8(ascii: "z") {
            return false
        }
        var componentStart = 0
        var i = 0
        while i <= n {
            let b: UInt8 = i < n ? bytes[i] : UInt8(ascii: "/")
            if b == 0 || b == UInt8(ascii: "\\") { return false }
            if b == UInt8(ascii: "/") {
                let len = i - componentStart
                if len == 0 { return false }
                if len == 1 && bytes[componentStart] == UInt8(ascii: ".") { return false }
                if len == 2 && bytes[componentStart] == UInt8(ascii: ".") && bytes[componentStart + 1] == UInt8(ascii: ".") { return false }
                componentStart = i + 1
            }
            i += 1
        }
        return isValidUTF8(bytes)
    }

    static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // Fast path: ASCII.
        var ascii = true
        for b in bytes where b >= 0x80 { ascii = false; break }
        if ascii { return true }
        return String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self) != nil
    }

    /// Where a variant suffix goes in `name`: before the last `.` of the last component when
    /// that `.` is not the component's first character, else at the end.
    /// `a.tar.gz` -> index of the last `.`; `README`, `.env` -> `name.count`.
    public static func suffixInsertionPoint(_ bytes: UnsafeRawBufferPointer) -> Int {
        var lastSlash = -1
        var lastDot = -1
        for i in 0..<bytes.count {
            if bytes[i] == UInt8(ascii: "/") { lastSlash = i; lastDot = -1 }
            else if bytes[i] == UInt8(ascii: ".") { lastDot = i }
        }
        if lastDot > lastSlash + 1 { return lastDot }
        return bytes.count
    }

    /// `name` with `suffix` inserted (`sub/sample.png` + `@3x` -> `sub/sample@3x.png`).
    public static func applyingVariant(_ name: String, _ suffix: String) -> String {
        if suffix.isEmpty { return name }
        let bytes = Array(name.utf8)
        let at = bytes.withUnsafeBytes { suffixInsertionPoint($0) }
        return String(decoding: bytes[..<at] + Array(suffix.utf8) + bytes[at...], as: UTF8.self)
    }
}

/// Path splitting on the byte '/', never on Characters: a '/' followed by a combining mark is
/// one Character in Swift, so `split(separator: "/")` and `lastIndex(of: "/")` would miss it.
extension String {
    /// The `/`-separated components (empty ones dropped).
    var slashComponents: [String] {
        utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Everything before the last `/`, or nil when there is none.
    var beforeLastSlash: String? {
        guard let i = utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        return String(decoding: utf8[..<i], as: UTF8.self)
    }

    /// Every proper directory prefix: "a/b/c" -> ["a/b", "a"].
    var directoryPrefixes: [String] {
        var out: [String] = []
        var current = self
        while let p = current.beforeLastSlash {
            out.append(p)
            current = p
        }
        return out
    }
}
