/// The one rule for resource names, manifest paths and archive entry names: relative,
/// `/`-separated, every component non-empty, at most 255 bytes and not `.` or `..`, no `\`, no
/// NUL, no drive letter, valid UTF-8, at most 4096 bytes in all. Names that pass can be appended to a directory without escaping it
/// ("zip slip" and path traversal).
package enum ResourceName {
    package static let maxLength = 4096

    package static func isValid(_ name: String) -> Bool {
        var copy = name
        return copy.withUTF8 { isValid(UnsafeRawBufferPointer($0)) }
    }

    /// Validates raw bytes (the resolve fast path and zip entry names): one pass over the bytes.
    package static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        guard n > 0, n <= maxLength, let p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
        if p[0] == UInt8(ascii: "/") { return false }
        // A drive letter ("C:x", "C:/x") names another root on Windows hosts.
        if n >= 2, p[1] == UInt8(ascii: ":"), (p[0] | 0x20) >= UInt8(ascii: "a"), (p[0] | 0x20) <= UInt8(ascii: "z") {
            return false
        }
        var componentStart = 0
        var high: UInt8 = 0
        var i = 0
        while i < n {
            let b = p[i]
            high |= b
            if b == UInt8(ascii: "/") {
                if !componentOK(p, componentStart, i) { return false }
                componentStart = i + 1
            } else if b == 0 || b == UInt8(ascii: "\\") {
                return false
            }
            i += 1
        }
        if !componentOK(p, componentStart, n) { return false }
        return high < 0x80 || isValidUTF8(bytes)
    }

    /// The longest component: what Linux file systems take for a file name (NAME_MAX).
    package static let maxComponentLength = 255

    /// A component is non-empty, at most `maxComponentLength` bytes, and neither "." nor "..".
    @inline(__always)
    private static func componentOK(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        let len = end - start
        if len == 0 || len > maxComponentLength { return false }
        if len == 1 && p[start] == UInt8(ascii: ".") { return false }
        if len == 2 && p[start] == UInt8(ascii: ".") && p[start + 1] == UInt8(ascii: ".") { return false }
        return true
    }

    static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        UTF8Check.isValid(bytes)
    }

    /// A name that is both a file and a parent directory of another name ("a" and "a/b"), if any.
    package static func fileDirectoryConflict(in names: Set<String>) -> String? {
        for name in names {
            for prefix in name.directoryPrefixes where names.contains(prefix) { return prefix }
        }
        return nil
    }

    /// The same for names in strictly increasing byte order, without a set of them: every name
    /// that sorts between a name and a longer one it begins has that same beginning, so the names
    /// under `d/` follow `d` in a run of names that begin with `d`, and a chain of the earlier
    /// names that begin the current one is all there is to look at. Names out of that order are
    /// the publisher's fault (`ERR_MANIFEST`).
    package static func fileDirectoryConflict<C: RandomAccessCollection>(sorted names: C, source: String) throws -> String?
        where C.Element == String {
        var chain: [C.Index] = []
        var previous: C.Index?
        for i in names.indices {
            let name = names[i].utf8
            if let previous, !names[previous].utf8.lexicographicallyPrecedes(name) {
                throw AssetPatchError(.manifest, "\(source): the files are not in path order at \"\(names[i])\"")
            }
            previous = i
            while let last = chain.last, !name.starts(with: names[last].utf8) { chain.removeLast() }
            for earlier in chain {
                let after = name.index(name.startIndex, offsetBy: names[earlier].utf8.count)
                if name[after] == UInt8(ascii: "/") { return names[earlier] }
            }
            chain.append(i)
        }
        return nil
    }

    /// Whether names in strictly increasing byte order include `name` (a binary search).
    package static func contains<C: RandomAccessCollection>(sorted names: C, _ name: String) -> Bool where C.Element == String {
        let i = names.lowerBound { $0.utf8.lexicographicallyPrecedes(name.utf8) }
        return i < names.endIndex && names[i].utf8.elementsEqual(name.utf8)
    }

    /// Where a variant suffix goes in `name`: before the last `.` of the last component when
    /// that `.` is not the component's first character, else at the end.
    /// `a.tar.gz` -> index of the last `.`; `README`, `.env` -> `name.count`.
    package static func suffixInsertionPoint(_ bytes: UnsafeRawBufferPointer) -> Int {
        var lastSlash = -1
        var lastDot = -1
        for i in 0..<bytes.count {
            if bytes[i] == UInt8(ascii: "/") { lastSlash = i; lastDot = -1 }
            else if bytes[i] == UInt8(ascii: ".") { lastDot = i }
        }
        if lastDot > lastSlash + 1 { return lastDot }
        return bytes.count
    }

    /// Variant candidates of one name share the bytes before the insertion point `at` (its
    /// `suffixInsertionPoint`): written once into `out`, then each `variant` writes only the
    /// suffix and the rest. Together they are the rule resolving runs for every lookup.
    @inline(__always)
    package static func beginVariants(of name: UnsafeRawBufferPointer, at: Int, into out: UnsafeMutableRawPointer) {
        if let n = name.baseAddress { out.copyMemory(from: n, byteCount: at) }
    }

    /// Completes the candidate in `out` (which `beginVariants` started, with room for
    /// `name.count + suffix.count` bytes): `suffix`, then the rest of `name`.
    @inline(__always)
    package static func variant(of name: UnsafeRawBufferPointer, at: Int, suffix: UnsafeRawBufferPointer,
                               into out: UnsafeMutableRawPointer) -> UnsafeRawBufferPointer {
        if let s = suffix.baseAddress { (out + at).copyMemory(from: s, byteCount: suffix.count) }
        if let n = name.baseAddress { (out + at + suffix.count).copyMemory(from: n + at, byteCount: name.count - at) }
        return UnsafeRawBufferPointer(start: out, count: name.count + suffix.count)
    }

    /// `name` with `suffix` inserted (`sub/sample.png` + `@3x` -> `sub/sample@3x.png`), by the
    /// same code as resolving.
    package static func applyingVariant(_ name: String, _ suffix: String) -> String {
        let bytes = Array(name.utf8), suffixBytes = Array(suffix.utf8)
        return bytes.withUnsafeBytes { n in
            suffixBytes.withUnsafeBytes { s in
                withUnsafeTemporaryAllocation(byteCount: n.count + s.count + 1, alignment: 1) { buffer in
                    let at = suffixInsertionPoint(n)
                    beginVariants(of: n, at: at, into: buffer.baseAddress!)
                    return String(decoding: variant(of: n, at: at, suffix: s, into: buffer.baseAddress!), as: UTF8.self)
                }
            }
        }
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

/// UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
/// written out because the standard library's generic `String(validating:)` is not
/// specialised across the module boundary and costs a metadata lookup per call.
enum UTF8Check {
    static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return true }
        let n = bytes.count
        var i = 0
        while i < n {
            let b = p[i]
            if b < 0x80 { i += 1; continue }
            @inline(__always) func cont(_ k: Int) -> Bool { i + k < n && p[i + k] & 0xC0 == 0x80 }
            if b >= 0xC2 && b <= 0xDF {
                guard cont(1) else { return false }
                i += 2
            } else if b >= 0xE0 && b <= 0xEF {
                guard cont(1), cont(2) else { return false }
                let b1 = p[i + 1]
                if b == 0xE0 && b1 < 0xA0 { return false }   // overlong
                if b == 0xED && b1 >= 0xA0 { return false }  // surrogates
                i += 3
            } else if b >= 0xF0 && b <= 0xF4 {
                guard cont(1), cont(2), cont(3) else { return false }
                let b1 = p[i + 1]
                if b == 0xF0 && b1 < 0x90 { return false }   // overlong
                if b == 0xF4 && b1 >= 0x90 { return false }  // above U+10FFFF
                i += 4
            } else {
                return false
            }
        }
        return true
    }

    static func isValid(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { isValid($0) } }
}
