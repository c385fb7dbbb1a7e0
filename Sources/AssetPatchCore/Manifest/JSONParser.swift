/// A strict RFC 8259 parser for untrusted input: bounded nesting, duplicate keys refused,
/// strings must be valid UTF-8 without unpaired surrogates, nothing but whitespace after the value.
package struct JSONParser {
    package struct Failure: Error, Sendable {
        package let message: String
    }

    package static let maxDepth = 64

    static func describe(_ error: any Error) -> String {
        (error as? Failure)?.message ?? "\(error)"
    }

    /// The document, or with a `source` the part of it not yet consumed (`bytes[pos...]`) and
    /// some already consumed.
    private var bytes: [UInt8]
    private var pos = 0
    private var depth = 0
    /// `parse(_:streaming:element:)`: the top-level key whose array is handed out element by
    /// element, and how.
    private var streamed: (key: String, element: Streamed)?
    private enum Streamed {
        /// Checked, not built.
        case checked
        /// Built and handed out.
        case values((JSON) throws -> Void)
        /// Checked, and handed out as its text (`parse(reading:streamingTextOf:element:)`),
        /// unless the reader read it.
        case text((UnsafeRawBufferPointer) throws -> Void, reader: ((UnsafeRawBufferPointer) throws -> Int)?)
    }
    /// Where the rest of the document comes from (`parse(reading:streaming:element:)`): fills
    /// the buffer it is given, 0 at the end.
    private var source: ((UnsafeMutableRawBufferPointer) throws -> Int)?
    /// Bytes of the document dropped from the front of `bytes` (consumed).
    private var dropped = 0
    /// An element's text is being read (`Streamed.text`): nothing is dropped until it is whole.
    private var holding = false
    /// What the source reads into.
    private var scratch: [UInt8] = []

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    package static func parse(_ bytes: [UInt8]) throws -> JSON {
        var p = JSONParser(bytes)
        return try p.document()
    }

    /// Parses like `parse`, except that when the top-level value is an object, the array under
    /// its `key` is not kept: each element is handed to `element` as soon as it is parsed, and
    /// the tree holds an empty array there. The document is checked as strictly as by `parse`.
    /// For a document that is mostly one long array (a release record's files): the tree of
    /// 100,000 small objects was most of an update's memory. With `element` nil the array's
    /// elements are checked without being built (keys repeated inside them are not looked for).
    package static func parse(_ bytes: [UInt8], streaming key: String, element: ((JSON) throws -> Void)?) throws -> JSON {
        try document(JSONParser(bytes), streaming: key, element: element)
    }

    /// `parser`'s document, the array under `key` streamed to `element`.
    private static func document(_ parser: JSONParser, streaming key: String, element: ((JSON) throws -> Void)?) throws -> JSON {
        guard let element else {
            var p = parser
            p.streamed = (key, .checked)
            return try p.document()
        }
        return try withoutActuallyEscaping(element) { element in
            var p = parser  // inside: the element must not outlive the call
            p.streamed = (key, .values(element))
            return try p.document()
        }
    }

    /// Parses like `parse(reading:streaming:element:)`, except that each element of the array
    /// under `key` is checked as strictly as the rest (keys repeated inside its objects aside)
    /// and handed to `text` as its exact text, valid only during the call: a reader that knows
    /// the form its writer uses reads it without a tree (a release record's files), and parses
    /// the text (`parse(_:)`) when it is in any other form.
    ///
    /// `reader`, first, is given the bytes from each element's start to the end of what is read
    /// so far, and returns the length of the element it read there, in a form that it knows to
    /// be valid JSON (the writer's own, checked as it is read), or 0: the element is then checked
    /// and handed to `text`. An element its writer wrote is then read in one pass, not two.
    package static func parse(reading source: @escaping (UnsafeMutableRawBufferPointer) throws -> Int, streamingTextOf key: String,
                              reader: ((UnsafeRawBufferPointer) throws -> Int)? = nil,
                              element text: (UnsafeRawBufferPointer) throws -> Void) throws -> JSON {
        var p = JSONParser([])
        p.source = source
        return try document(p, streamingTextOf: key, reader: reader, element: text)
    }

    /// `parse(reading:streamingTextOf:reader:element:)` of a document in memory.
    package static func parse(_ bytes: [UInt8], streamingTextOf key: String, reader: ((UnsafeRawBufferPointer) throws -> Int)? = nil,
                              element text: (UnsafeRawBufferPointer) throws -> Void) throws -> JSON {
        try document(JSONParser(bytes), streamingTextOf: key, reader: reader, element: text)
    }

    private static func document(_ parser: JSONParser, streamingTextOf key: String, reader: ((UnsafeRawBufferPointer) throws -> Int)?,
                                 element text: (UnsafeRawBufferPointer) throws -> Void) throws -> JSON {
        try withoutActuallyEscaping(text) { text in
            guard let reader else {
                var p = parser  // inside: the element must not outlive the call
                p.streamed = (key, .text(text, reader: nil))
                return try p.document()
            }
            return try withoutActuallyEscaping(reader) { reader in
                var p = parser
                p.streamed = (key, .text(text, reader: reader))
                return try p.document()
            }
        }
    }

    /// Parses like `parse(_:streaming:element:)` a document read from `source` as it is parsed
    /// (which fills the buffer it is given and returns the count, 0 at the end): what was
    /// consumed is dropped, so a 12 MB release record is never in memory whole. Errors `source`
    /// throws are passed on.
    package static func parse(reading source: @escaping (UnsafeMutableRawBufferPointer) throws -> Int, streaming key: String,
                              element: ((JSON) throws -> Void)?) throws -> JSON {
        var p = JSONParser([])
        p.source = source
        return try document(p, streaming: key, element: element)
    }

    /// Read ahead from a `source` at a time.
    static let readAhead = 256 << 10
    /// Consumed bytes are dropped once there are this many (before a value, where no token
    /// holds a position in `bytes`). With the window sized once for this and two reads, a
    /// record is read in 1 MiB (window and scratch) unless a single token is longer: dropped
    /// at 1 MiB and grown by doubling, the window took 3 MiB at an update's peak.
    static let dropAfter = readAhead

    private mutating func document() throws -> JSON {
        try skipWhitespace()
        let v = try value()
        try skipWhitespace()
        if try more() { throw fail("unexpected data after the JSON value") }
        return v
    }

    /// Whether `n` more bytes are there at `pos` (reading them from the source if need be).
    @inline(__always)
    private mutating func more(_ n: Int = 1) throws -> Bool {
        pos + n <= bytes.count ? true : try fill(pos + n)
    }

    /// Reads from the source until `bytes` holds `count` bytes or the source ends. Positions in
    /// `bytes` stay valid (a token may span reads).
    private mutating func fill(_ count: Int) throws -> Bool {
        guard let source else { return false }
        if scratch.isEmpty {
            scratch = [UInt8](repeating: 0, count: JSONParser.readAhead)
            bytes.reserveCapacity(JSONParser.dropAfter + 2 * JSONParser.readAhead)
        }
        while bytes.count < count {
            let n = try scratch.withUnsafeMutableBytes { try source($0) }
            guard n > 0 else {
                self.source = nil
                return false
            }
            bytes.append(contentsOf: scratch[..<min(n, scratch.count)])
        }
        return true
    }

    private func fail(_ what: String) -> Failure {
        Failure(message: "\(what) at byte \(dropped + pos)")
    }

    private mutating func skipWhitespace() throws {
        while try more(), bytes[pos] == 0x20 || bytes[pos] == 0x0A || bytes[pos] == 0x0D || bytes[pos] == 0x09 {
            pos += 1
        }
    }

    /// The next value; without `keep`, checked and passed over (`.null`, nothing allocated).
    private mutating func value(keep: Bool = true) throws -> JSON {
        compact()
        guard try more() else { throw fail("unexpected end of JSON") }
        switch bytes[pos] {
        case UInt8(ascii: "{"): return try object(keep: keep)
        case UInt8(ascii: "["):
            guard keep else {
                try array(.checked)
                return .null
            }
            return try array()
        case UInt8(ascii: "\""): return .string(try string(keep: keep))
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number(keep: keep)
        default: throw fail("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString) throws {
        let n = word.utf8CodeUnitCount
        guard try more(n) else { throw fail("unexpected end of JSON") }
        for i in 0..<n where bytes[pos + i] != word.utf8Start[i] { throw fail("invalid literal") }
        pos += n
    }

    /// Drops what was consumed, once there is `dropAfter` of it (reading from a source). Only
    /// between tokens, and not while an element's text is held: positions in `bytes` change.
    private mutating func compact() {
        if source != nil, !holding, pos >= JSONParser.dropAfter {
            bytes.removeFirst(pos)
            dropped += pos
            pos = 0
        }
    }

    private mutating func enter() throws {
        depth += 1
        if depth > JSONParser.maxDepth { throw fail("nesting deeper than \(JSONParser.maxDepth)") }
    }

    private mutating func object(keep: Bool = true) throws -> JSON {
        try enter()
        pos += 1
        var pairs: [(String, JSON)] = []
        /// The keys, once there are too many to look through (most objects have a few).
        var keys = Set<String>()
        try skipWhitespace()
        if try more(), bytes[pos] == UInt8(ascii: "}") {
            pos += 1
            depth -= 1
            return .object(pairs)
        }
        while true {
            try skipWhitespace()
            guard try more(), bytes[pos] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try string(keep: keep)
            if keep {
                let repeated: Bool
                if pairs.count < 16 {
                    repeated = pairs.contains { $0.0 == key }
                } else {
                    if keys.isEmpty { keys = Set(pairs.map(\.0)) }
                    repeated = !keys.insert(key).inserted
                }
                if repeated { throw fail("duplicate key \"\(key)\"") }
            }
            try skipWhitespace()
            guard try more(), bytes[pos] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            pos += 1
            try skipWhitespace()
            if !keep {
                _ = try value(keep: false)
            } else if depth == 1, let streamed, streamed.key == key, try more(), bytes[pos] == UInt8(ascii: "[") {
                try array(streamed.element)
                pairs.append((key, .array([])))
            } else {
                pairs.append((key, try value()))
            }
            guard try another(closing: UInt8(ascii: "}")) else { break }
        }
        depth -= 1
        return .object(pairs)
    }

    /// After a member or an element: whether another follows (","), or its container ends at
    /// `close`.
    private mutating func another(closing close: UInt8) throws -> Bool {
        try skipWhitespace()
        guard try more() else { throw fail("unexpected end of JSON") }
        if bytes[pos] == UInt8(ascii: ",") { pos += 1; return true }
        if bytes[pos] == close { pos += 1; return false }
        throw fail("expected ',' or '\(Character(Unicode.Scalar(close)))'")
    }

    private mutating func array() throws -> JSON {
        var items: [JSON] = []
        try array(.values { items.append($0) })
        return .array(items)
    }

    /// An array, each element handed out as `each` says.
    private mutating func array(_ each: Streamed) throws {
        try enter()
        pos += 1
        try skipWhitespace()
        if try more(), bytes[pos] == UInt8(ascii: "]") {
            pos += 1
            depth -= 1
            return
        }
        while true {
            try skipWhitespace()
            switch each {
            case .checked: _ = try value(keep: false)
            case let .values(element): try element(try value())
            case let .text(element, reader):
                compact()
                if let reader {
                    let n = try bytes.withUnsafeBytes { try reader(UnsafeRawBufferPointer(rebasing: $0[pos...])) }
                    guard n <= bytes.count - pos else { throw fail("an element read past what was read") }
                    if n > 0 {
                        pos += n
                        break
                    }
                }
                let start = pos
                holding = true
                _ = try value(keep: false)
                holding = false
                try bytes.withUnsafeBytes { try element(UnsafeRawBufferPointer(rebasing: $0[start..<pos])) }
            }
            guard try another(closing: UInt8(ascii: "]")) else { break }
        }
        depth -= 1
    }

    private mutating func number(keep: Bool = true) throws -> JSON {
        let start = pos
        func isDigit(_ b: UInt8) -> Bool { b >= 48 && b <= 57 }
        if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
        guard try more(), isDigit(bytes[pos]) else { throw fail("invalid number") }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
        } else {
            while try more(), isDigit(bytes[pos]) { pos += 1 }
        }
        if try more(), bytes[pos] == UInt8(ascii: ".") {
            pos += 1
            guard try more(), isDigit(bytes[pos]) else { throw fail("invalid number") }
            while try more(), isDigit(bytes[pos]) { pos += 1 }
        }
        if try more(), bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E") {
            pos += 1
            if try more(), bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") { pos += 1 }
            guard try more(), isDigit(bytes[pos]) else { throw fail("invalid number") }
            while try more(), isDigit(bytes[pos]) { pos += 1 }
        }
        if pos - start > 400 { throw fail("number literal too long") }
        guard keep else { return .null }
        return .number(String(decoding: bytes[start..<pos], as: UTF8.self))
    }

    private mutating func hex4() throws -> UInt32 {
        guard try more(4) else { throw fail("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[pos]
            let d: UInt32
            switch b {
            case 48...57: d = UInt32(b - 48)
            case 97...102: d = UInt32(b - 87)
            case 65...70: d = UInt32(b - 55)
            default: throw fail("invalid \\u escape")
            }
            v = v << 4 | d
            pos += 1
        }
        return v
    }

    /// The next string; without `keep`, checked and "" returned.
    private mutating func string(keep: Bool = true) throws -> String {
        pos += 1
        let start = pos
        var out: [UInt8] = []
        var runStart = pos
        // Up to the first quote, escape or control character, over what is read so far (and
        // more, read as it runs out): byte by byte below, most of a record's parse was this.
        while true {
            let end = bytes.count
            pos = bytes.withUnsafeBufferPointer { b in
                var i = pos
                while i < end, b[i] != UInt8(ascii: "\""), b[i] != UInt8(ascii: "\\"), b[i] >= 0x20 { i += 1 }
                return i
            }
            if pos < end { break }
            guard try more() else { throw fail("unterminated string") }
        }
        while true {
            guard try more() else { throw fail("unterminated string") }
            let b = bytes[pos]
            if b == UInt8(ascii: "\""), runStart == start {
                // No escape (most strings): checked and made in place.
                let valid = bytes.withUnsafeBytes { UTF8Check.isValid(UnsafeRawBufferPointer(rebasing: $0[start..<pos])) }
                guard valid else { throw fail("string is not valid UTF-8") }
                pos += 1
                return keep ? String(decoding: bytes[start..<(pos - 1)], as: UTF8.self) : ""
            }
            if b == UInt8(ascii: "\"") {
                out.append(contentsOf: bytes[runStart..<pos])
                pos += 1
                break
            }
            if b < 0x20 { throw fail("control character in string") }
            if b != UInt8(ascii: "\\") { pos += 1; continue }
            out.append(contentsOf: bytes[runStart..<pos])
            pos += 1
            guard try more() else { throw fail("unterminated string") }
            let e = bytes[pos]
            pos += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard try more(2), bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate")
                    }
                    pos += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw fail("unpaired surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw fail("unpaired surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("invalid escape")
            }
            runStart = pos
        }
        guard UTF8Check.isValid(out) else { throw fail("string is not valid UTF-8") }
        return keep ? String(decoding: out, as: UTF8.self) : ""
    }
}
