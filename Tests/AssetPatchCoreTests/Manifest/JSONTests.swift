import Testing
@testable import AssetPatchCore

@Suite struct JSONTests {
    func parse(_ s: String) throws -> JSON { try JSONParser.parse(Array(s.utf8)) }

    @Test func parsesNestedValuesKeepingKeyOrder() throws {
        let v = try parse(#"{"b": [1, -2.5e3, true, null], "a": {"x": "y\u00e9\n"}}"#)
        #expect(v["b"]?.array?.count == 4)
        #expect(v["b"]?.array?[0].int64 == 1)
        #expect(v["b"]?.array?[1].int64 == nil)
        #expect(v["a"]?["x"]?.string == "yé\n")
        guard case let .object(pairs) = v else { Issue.record("not an object"); return }
        #expect(pairs.map(\.0) == ["b", "a"])
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", "-", "+1", "\"\\x\"", "\"a", "[1] 2",
        "{\"a\":1,\"a\":2}", "\"\\ud800\"", "\"\\udc00\"", "nul", "\"tab\there\"", "{1:2}",
    ])
    func rejectsMalformedInput(_ text: String) {
        #expect(throws: (any Error).self) { try parse(text) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: (any Error).self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test func aKeyRepeatedIsRefusedInObjectsOfEverySize() throws {
        // Up to 16 keys are looked through, then a set takes over: a repeat on either side of
        // the change, of the first key or of the one before it.
        for count in [2, 15, 16, 17, 40] {
            let keys = (0..<count).map { "\"k\($0)\":\($0)" }
            #expect(try parse("{" + keys.joined(separator: ",") + "}")["k\(count - 1)"]?.int64 == Int64(count - 1))
            for repeated in [0, count - 1] {
                let text = "{" + (keys + ["\"k\(repeated)\":0"]).joined(separator: ",") + "}"
                #expect(throws: JSONParser.Failure.self, "\(count) \(repeated)") { try parse(text) }
            }
        }
    }

    @Test func boundsNesting() throws {
        let ok = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        _ = try parse(ok)
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: (any Error).self) { try parse(deep) }
    }

    @Test func hugeNumbersAreNotIntegers() throws {
        #expect(try parse("99999999999999999999999").int64 == nil)
        #expect(try parse("9223372036854775807").int64 == Int64.max)
        #expect(try parse("1e3").int64 == nil)
    }

    /// A release record's text as `serialize` hands it out, piece by piece.
    func text(_ record: ReleaseRecord, pieceSize: Int = 64 << 10) -> String {
        var bytes: [UInt8] = []
        var pieces = 0
        record.serialize(pieceSize: pieceSize) { bytes += $0; pieces += 1 }
        let all = String(decoding: bytes, as: UTF8.self)
        #expect(pieceSize > 1 || pieces > record.files.count)
        return all
    }

    @Test func aReleaseRecordIsWrittenAsItsTreeWouldBe() throws {
        let sha = String(repeating: "0f", count: 32)
        let files = [ManifestFile(path: "a \"quoted\" \\ name\u{1}\t.txt", size: 0, sha256: sha),
                     ManifestFile(path: "ünïcödé/😀.png", size: UInt64(Int64.max), sha256: sha),
                     ManifestFile(path: "plain", size: 12, sha256: sha)]
        var record = ReleaseRecord(version: 7, files: files, plugins: [PluginDeclaration(name: "p", path: "p.so", entry: "e", version: "1.0")],
                                   signatureVerified: true, archiveDigest: sha, label: "a \"label\"", created: 1_700_000_000,
                                   notes: "line\nbreak", mandatory: true, minAppVersion: "1.2", maxAppVersion: nil)
        #expect(text(record) == record.toJSON().serialized())
        #expect(text(record, pieceSize: 1) == record.toJSON().serialized())
        record.indexRoot = PageRef(sha256: Array(repeating: 0xAB, count: 32), compressedSize: 4096)
        record.channel = "beta"
        record.rolloutBasisPoints = 2500
        record.files = []
        #expect(text(record) == record.toJSON().serialized())
        let back = try #require(ReleaseRecord.decode(Array(text(record).utf8)))
        #expect(back.channel == "beta" && back.rolloutBasisPoints == 2500 && back.label == "a \"label\"")
    }

    @Test func aStreamedArrayIsHandedOutElementByElementAndCheckedAsStrictly() throws {
        let text = #"{"a":1,"files":[{"x":1},[2],"s"],"inner":{"files":[3]},"z":null}"#
        var seen: [JSON] = []
        let tree = try JSONParser.parse(Array(text.utf8), streaming: "files") { seen.append($0) }
        #expect(seen == [try parse(#"{"x":1}"#), .array([.int(2)]), .string("s")])
        // Only the top level's array is streamed; the rest of the tree is what parse builds.
        #expect(tree == (try parse(text)).setting("files", .array([])))
        // Checked without being built: the same tree.
        #expect(try JSONParser.parse(Array(text.utf8), streaming: "files", element: nil) == tree)
        for bad in [#"{"files":[1,]}"#, #"{"files":[1],"files":[]}"#, #"{"files":[1] x}"#, #"{"files":[{"k":1,"k":2}]}"#] {
            #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(Array(bad.utf8), streaming: "files") { _ in } }
        }
        // Passed over unbuilt, elements are still checked, except for keys repeated inside them.
        for bad in [#"{"files":[1,]}"#, #"{"files":[1] x}"#, #"{"files":[{"k":01}]}"#, #"{"files":["\u00"]}"#, #"{"files":[[[tru]]]}"#,
                    "{\"files\":[\"\u{1}\"]}", #"{"files":[{"a" 1}]}"#] {
            #expect(throws: JSONParser.Failure.self, "\(bad)") { try JSONParser.parse(Array(bad.utf8), streaming: "files", element: nil) }
        }
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse([UInt8](#"{"files":[""#.utf8) + [0xFF, 0x22, 0x5D, 0x7D], streaming: "files", element: nil) }
        #expect(try JSONParser.parse(Array(#"{"files":[{"k":1,"k":2}]}"#.utf8), streaming: "files", element: nil) == .object([("files", .array([]))]))
    }

    /// A source handing out `text` in pieces of the sizes `sizes` gives in turn (repeated).
    final class Pieces {
        let bytes: [UInt8]
        let sizes: [Int]
        var at = 0, calls = 0
        init(_ bytes: [UInt8], _ sizes: [Int]) { (self.bytes, self.sizes) = (bytes, sizes) }
        func read(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
            let n = min(buffer.count, sizes[calls % sizes.count], bytes.count - at)
            calls += 1
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[at..<(at + n)])) }
            at += n
            return n
        }
    }

    /// Parses `bytes` whole and from pieces of every size given: the same tree, the same
    /// elements, or the same failure at the same byte.
    func expectSameReadInPieces(_ bytes: [UInt8], sizes: [[Int]], _ note: String) {
        func run(_ parse: (((JSON) throws -> Void)?) throws -> JSON) -> String {
            var seen: [JSON] = []
            do {
                let tree = try parse { seen.append($0) }
                return "ok \(tree.serialized()) \(JSON.array(seen).serialized())"
            } catch { return "failed \(JSONParser.describe(error))" }
        }
        // Elements handed out as their text: the tree and failures of the unbuilt parse, and
        // each text parses to the element the building parse handed out.
        func texts(_ parse: ((UnsafeRawBufferPointer) throws -> Void) throws -> JSON) -> String {
            var seen: [String] = []
            guard let tree = try? parse({ seen.append(String(decoding: $0, as: UTF8.self)) }) else { return "failed" }
            return "ok \(tree.serialized()) " + seen.joined(separator: "\u{0}")
        }
        let whole = run { try JSONParser.parse(bytes, streaming: "files", element: $0) }
        let unbuilt = (try? JSONParser.parse(bytes, streaming: "files", element: nil))?.serialized()
        let textual = texts { try JSONParser.parse(bytes, streamingTextOf: "files", element: $0) }
        #expect(textual.hasPrefix("ok") == (unbuilt != nil), "\(note)")
        if whole.hasPrefix("ok") {
            var seen: [JSON] = []
            _ = try? JSONParser.parse(bytes, streamingTextOf: "files", element: { seen.append((try? JSONParser.parse(Array($0))) ?? .null) })
            #expect(whole == "ok \(((try? JSONParser.parse(bytes, streaming: "files", element: nil)) ?? .null).serialized()) \(JSON.array(seen).serialized())",
                    "\(note)")
        }
        // With a reader of one form (`{"x":1}`, read where it is whole): the same elements, in order.
        let known = Array(#"{"x":1}"#.utf8)
        func withReader(_ parse: (@escaping (UnsafeRawBufferPointer) throws -> Int, (UnsafeRawBufferPointer) throws -> Void) throws -> JSON) -> String {
            var seen: [String] = []
            let reader = { (b: UnsafeRawBufferPointer) -> Int in
                guard b.count >= known.count, b.prefix(known.count).elementsEqual(known) else { return 0 }
                seen.append(String(decoding: known, as: UTF8.self))
                return known.count
            }
            guard let tree = try? parse(reader, { seen.append(String(decoding: $0, as: UTF8.self)) }) else { return "failed" }
            return "ok \(tree.serialized()) " + seen.joined(separator: "\u{0}")
        }
        #expect(withReader { try JSONParser.parse(bytes, streamingTextOf: "files", reader: $0, element: $1) } == textual, "\(note)")
        for s in sizes {
            #expect(withReader { try JSONParser.parse(reading: Pieces(bytes, s).read, streamingTextOf: "files", reader: $0, element: $1) } == textual,
                    "\(note) \(s)")
            #expect(run { try JSONParser.parse(reading: Pieces(bytes, s).read, streaming: "files", element: $0) } == whole, "\(note) \(s)")
            #expect((try? JSONParser.parse(reading: Pieces(bytes, s).read, streaming: "files", element: nil))?.serialized() == unbuilt, "\(note) \(s)")
            #expect(texts { try JSONParser.parse(reading: Pieces(bytes, s).read, streamingTextOf: "files", element: $0) } == textual, "\(note) \(s)")
        }
    }

    @Test func aDocumentReadAsItIsParsedIsTheWholeTextsAtEveryPieceSize() throws {
        let sizes = [[1], [2], [3], [7], [4096], [1, 5, 2, 64]]
        let docs = [#"{"a":1,"files":[{"x":1},[2],"s"],"inner":{"files":[3]},"z":null}"#, #"{"files":[{"x":1},{"x":1} ,{"x":1}x]}"#,
                    #"{"files":[{"x":1}{"x":1}]}"#, #"{"files":[{"x":1},{"x":1,"x":2},{"x":1}]}"#, #"{"files":[1,]}"#, #"{"files":[1],"files":[]}"#,
                    #"{"files":[1] x}"#, #"{"files":[{"k":01}]}"#, #"{"files":["\u00"]}"#, #"{"files":[[[tru]]]}"#, #"{"files":[{"a" 1}]}"#,
                    #"{"s":"q\"b\\c\u0001\ud83d\ude00","n":[1,-2.5e3,true,null,0.5E+7],"e":{}}"#, #"{"s":"\ud83d"}"#, "[1, 2", "", " ",
                    #"{"files":[-]}"#, #"{"files":[1e]}"#, #"{"files":"x"}"#, "{\"files\":[\"\u{1}\"]}", "[\"é\"]  ", "truex", "nul"]
        for d in docs { expectSameReadInPieces(Array(d.utf8), sizes: sizes, d) }
        expectSameReadInPieces([UInt8](#"{"files":[""#.utf8) + [0xFF, 0x22, 0x5D, 0x7D], sizes: sizes, "invalid UTF-8")
        expectSameReadInPieces([UInt8](#"{"files":["é"#.utf8).dropLast() + Array(#""]}"#.utf8), sizes: sizes, "a cut scalar")
        // Longer than what the parser drops after, with escapes, numbers and strings across
        // every read's end, members after the array, and a failure far past what was dropped.
        var big = #"{"head":"x","files":["#
        for i in 0..<50_000 { big += (i > 0 ? "," : "") + (i % 3 == 0 ? #"{"x":1}"# : #"{"path":"d\#(i % 97)/fé\#(i).png","size":\#(i * 7919),"sha256":"\#(i)"}"#) }
        big += #"],"tail":[1.5,{"k":"v"}]}"#
        #expect(big.utf8.count > 2 * JSONParser.dropAfter)
        expectSameReadInPieces(Array(big.utf8), sizes: [[4096], [JSONParser.readAhead], [1, 5000, 3, 65536]], "big")
        expectSameReadInPieces(Array(big.dropLast().utf8) + Array(",}".utf8), sizes: [[4096], [7, 65536]], "big, bad at the end")
        // One token longer than the window (a string of 1.2 MiB, after what is dropped) grows it.
        let long = #"{"files":["# + String(repeating: #""x","#, count: 70_000) + #"{"s":""# + String(repeating: "ab", count: 600 << 10) + #""}],"t":1}"#
        expectSameReadInPieces(Array(long.utf8), sizes: [[JSONParser.readAhead], [65536, 3]], "a long token")
        // Read as parsed: when an element is handed out, at most a read ahead past it was read.
        let pieces = Pieces(Array(big.utf8), [4096])
        var handed = 0, furthest = 0
        _ = try JSONParser.parse(reading: pieces.read, streaming: "files") { _ in
            handed += 1
            if handed == 20_000 { furthest = pieces.at }
        }
        let end = try #require(big.utf8.firstRange(of: Array(#""sha256":"19999"}"#.utf8)))
        #expect(furthest <= big.utf8.distance(from: big.utf8.startIndex, to: end.upperBound) + JSONParser.readAhead)
        // What the source throws is passed on, not taken for a bad document.
        struct Broken: Error {}
        let first = Pieces(Array(big.utf8.prefix(5000)), [1000])
        #expect(throws: Broken.self) {
            try JSONParser.parse(reading: { buffer in
                let n = first.read(buffer)
                if n == 0 { throw Broken() }
                return n
            }, streaming: "files", element: nil)
        }
    }

    @Test func aReleaseRecordDecodesItsFilesOnlyWhenAskedAndRefusesBadOnes() throws {
        let sha = String(repeating: "0f", count: 32)
        let record = ReleaseRecord(version: 3, files: [ManifestFile(path: "a/b.png", size: 5, sha256: sha), ManifestFile(path: "c", size: 0, sha256: sha)],
                                   plugins: [], signatureVerified: true, archiveDigest: sha, label: nil)
        let bytes = Array(text(record).utf8)
        let full = try #require(ReleaseRecord.decode(bytes))
        #expect(full.files.map(\.path) == ["a/b.png", "c"] && full.files.map(\.size) == [5, 0] && full.signatureVerified)
        let header = try #require(ReleaseRecord.decode(bytes, listingFiles: false))
        #expect(header.files.isEmpty && header.version == 3 && header.signatureVerified)
        // Each bad in one way only: the digest of the others is good.
        let s = sha
        for bad in [#"{"path":"../x","size":1,"sha256":"\#(s)"}"#, #"{"path":"x","size":-1,"sha256":"\#(s)"}"#,
                    #"{"path":"x","size":1,"sha256":"\#(s)","group":1}"#, #"{"path":"x","size":1,"sha256":"\#(s)","group":70000}"#,
                    #"{"path":"x","size":1}"#, #"{"path":"x","size":1,"sha256":"\#(s.dropLast())"}"#,
                    #"{"path":"x","size":1,"sha256":"\#(s.dropLast())g"}"#, #"{"path":"x","size":1,"sha256":"\#(s)0"}"#] {
            let text = record.toJSON().setting("files", .array([try parse(bad), try parse(#"{"path":"y","size":1,"sha256":"\#(s)"}"#)])).serialized()
            #expect(ReleaseRecord.decode(Array(text.utf8)) == nil, "\(bad)")
            #expect(ReleaseRecord.decode(Array(text.utf8), listingFiles: false) != nil, "\(bad)")
        }
    }

    @Test func aRecordsFilesReadInTheFormItsWriterUsesOrAnyOtherAreTheSame() throws {
        let sha = String(repeating: "0f", count: 31) + "aB"
        let files = [ManifestFile(path: "a/b.png", size: 5, sha256: sha), ManifestFile(path: "c", size: 0, sha256: sha),
                     ManifestFile(path: "ünïcödé/😀 x.png", size: 999_999_999_999_999_999, sha256: sha, group: 2),
                     ManifestFile(path: "q\"uote", size: 1, sha256: sha), ManifestFile(path: "big", size: UInt64(Int64.max), sha256: sha, group: 1)]
        var record = ReleaseRecord(version: 3, files: files, plugins: [], signatureVerified: true, archiveDigest: sha, label: nil)
        record.groups = [ReleaseGroup(name: "g1", delivery: .install), ReleaseGroup(name: "g2", delivery: .install)]
        var written: [String] = []
        let recordText = text(record)
        _ = try JSONParser.parse(Array(recordText.utf8), streaming: "files") { written.append($0.serialized()) }
        // The writer's own form is read in one pass, except where it had to escape or the size
        // has 19 digits (read as JSON).
        let direct = written.map { w in Array(w.utf8).withUnsafeBytes { RecordedFile.read($0) } }
        #expect(direct.map { $0 != nil } == [true, true, true, false, false])
        #expect(direct.compactMap { $0 } == Array(files.prefix(3)))
        let decoded = try #require(ReleaseRecord.decode(Array(recordText.utf8)))
        #expect(decoded.files == files)
        // The same files in other forms: spacing, key order, escapes, an explicit base group.
        let others = [#" { "path" : "a/b.png" , "size" : 5 , "sha256" : "\#(sha)" } "#,
                      #"{"sha256":"\#(sha)","size":0,"path":"c"}"#,
                      #"{"path":"\u00fcn\u00efc\u00f6d\u00e9/\ud83d\ude00 x.png","size":999999999999999999,"sha256":"\#(sha)","group":2}"#,
                      #"{"path":"q\"uote","size":1,"sha256":"\#(sha)","group":0}"#,
                      #"{"path":"big","size":9223372036854775807,"sha256":"\#(sha.uppercased())","group":1}"#]
        let other = record.toJSON(listingFiles: false).setting("files", .array(try others.map { try parse($0) })).serialized(indent: 2)
        #expect(ReleaseRecord.decode(Array(other.utf8))?.files == files)
        #expect(Array(#"{"path":"c","size":0,"sha256":"\#(sha)","group":65535}"#.utf8).withUnsafeBytes { RecordedFile.read($0) }?.group == 65535)
        for o in others.prefix(3) { #expect(Array(o.utf8).withUnsafeBytes { RecordedFile.read($0) } == nil, "\(o)") }
        // Near misses of the form are read as JSON or refused, never misread.
        for (near, same) in [(#"{"path":"c","size":00,"sha256":"\#(sha)"}"#, false), (#"{"path":"c","size":0,"sha256":"\#(sha)"} "#, true),
                             (#"{"path":"c","size":0,"sha256":"\#(sha)","group":65536}"#, false), (#"{"path":"c","size":0.0,"sha256":"\#(sha)"}"#, false),
                             (#"{"path":"c","size":0,"sha256":"\#(sha)","group":-1}"#, false), (#"{"path":"c","size":0,"sha256":"\#(sha)","x":1}"#, true)] {
            let bytes = Array(near.utf8)
            #expect(bytes.withUnsafeBytes { RecordedFile.read($0) } == nil, "\(near)")
            if same { #expect((try? JSONParser.parse(bytes)).flatMap(RecordedFile.read) != nil, "\(near)") }
        }
    }

    @Test func aRecordWhoseFilesAreInTheWritersFormButNotValidJSONIsRefused() throws {
        let sha = String(repeating: "0f", count: 32)
        let files = (0..<3000).map { ManifestFile(path: "dir\($0 % 7)/file-\($0).png", size: UInt64($0), sha256: sha) }
        let record = ReleaseRecord(version: 3, files: files, plugins: [], signatureVerified: true, archiveDigest: sha, label: nil)
        let good = Array(text(record).utf8)
        func decoded(_ bytes: [UInt8]) -> [ReleaseRecord?] {
            [ReleaseRecord.decode(bytes)] + [[1], [4096], [7, 65536]].map { s in (try? ReleaseRecord.decode(reading: Pieces(bytes, s).read)) ?? nil }
        }
        for r in decoded(good) { #expect(r?.files == files) }
        // A key repeated inside a file's element: not the writer's form, refused as JSON.
        var repeated = good
        let sizeKey = Array(#","size":2000,"#.utf8)
        let sizeAt = try #require(good.firstRange(of: sizeKey)).lowerBound
        repeated.insert(contentsOf: Array(#","size":2000"#.utf8), at: sizeAt)
        for r in decoded(repeated) { #expect(r == nil, "a key repeated") }
        // In the 2,000th file's path: a control character, bytes that are not UTF-8, a quote
        // cut short (the element ends inside its string).
        let at = try #require(good.firstRange(of: Array("file-2000.png".utf8))).lowerBound
        for bad: [UInt8] in [[0x01], [0xFF, 0xFE], [0xC3]] {
            var bytes = good
            bytes.replaceSubrange(at..<(at + bad.count), with: bad)
            for r in decoded(bytes) { #expect(r == nil, "\(bad)") }
        }
    }

    @Test func serialisationRoundTrips() throws {
        let v = try parse(#"{"s":"q\"b\\c\u0001","n":[1,2,{"z":false}],"e":{}}"#)
        #expect(try parse(v.serialized()) == v)
        #expect(try parse(v.serialized(indent: 2)) == v)
    }
}
