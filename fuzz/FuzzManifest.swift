// libFuzzer target: manifest and DSSE envelope decoding, and the JSON parser under it.
// Invariants: never crash; a parsed JSON value survives a serialise/parse round trip, and a
// streamed parse agrees with the whole one; a
// decoded manifest only ever holds safe, unique paths, and zip locations that are all there or
// all absent, inside the archive and disjoint; a release record's one-pass reader of its files
// accepts only what the parser does and reads what their JSON names.

private let trustedKey: [UInt8] = (try? Ed25519.publicKey(fromSeed: [UInt8](repeating: 7, count: 32))) ?? []

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzManifest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let json = try? JSONParser.parse(bytes) {
        guard let again = try? JSONParser.parse(Array(json.serialized().utf8)), again == json else {
            fatalError("JSON round trip changed the value")
        }
    }
    // A streamed parse hands out the elements of the top level's "files" array and builds the
    // rest of the same tree, and accepts exactly what `parse` does; passing the elements over
    // unbuilt builds the same tree.
    var elements: [JSON] = []
    let whole = try? JSONParser.parse(bytes)
    let tree = try? JSONParser.parse(bytes, streaming: "files") { elements.append($0) }
    precondition((whole == nil) == (tree == nil), "a streamed parse accepts other documents")
    if let whole, let tree {
        let files = whole.isObject ? whole["files"]?.array : nil
        precondition(tree == (files == nil ? whole : whole.setting("files", .array([]))), "a streamed parse built another tree")
        precondition(elements == (files ?? []), "a streamed parse handed out other elements")
        precondition((try? JSONParser.parse(bytes, streaming: "files", element: nil)) == tree, "passing elements over changed the tree")
    }
    // Handed out as text, with or without the release record's one-pass reader first: the
    // same documents accepted and the same tree as passing the elements over; an element the
    // reader reads is the file its JSON names, and a record decodes to the files its
    // elements' JSON names.
    let unbuilt = try? JSONParser.parse(bytes, streaming: "files", element: nil)
    var texts: [[UInt8]] = []
    precondition((try? JSONParser.parse(bytes, streamingTextOf: "files") { texts.append(Array($0)) }) == unbuilt, "text streaming changed the tree")
    var read: [ManifestFile?] = []
    let viaReader = try? JSONParser.parse(bytes, streamingTextOf: "files", reader: { b in
        guard let (file, n) = RecordedFile.read(prefixOf: b) else { return 0 }
        precondition((try? JSONParser.parse(Array(b[..<n]))).flatMap(RecordedFile.read) == file, "the reader read another file than the element's JSON names")
        read.append(file)
        return n
    }) { read.append((try? JSONParser.parse(Array($0))).flatMap(RecordedFile.read)) }
    precondition(viaReader == unbuilt, "the reader changed what is accepted")
    if let record = ReleaseRecord.decode(bytes) {
        precondition(!read.contains(nil) && record.files == read.compactMap { $0 }, "a record decoded other files than its elements name")
    }
    for keys in [[], [trustedKey]] {
        if let m = try? Manifest.decode(bytes, trustedKeys: keys) {
            var seen = Set<String>()
            for f in m.files {
                precondition(ResourceName.isValid(f.path), "unsafe path accepted: \(f.path)")
                precondition(seen.insert(f.path).inserted, "duplicate path accepted")
            }
            let located = m.files.compactMap { $0.location }
            precondition(located.isEmpty || located.count == m.files.count, "some files located, some not")
            let ranges = located.map(\.range).sorted { $0.lowerBound < $1.lowerBound }
            for r in ranges { precondition(r.upperBound <= (m.archiveSize ?? 0), "location past the archive") }
            for k in 1..<max(1, ranges.count) { precondition(ranges[k - 1].upperBound <= ranges[k].lowerBound, "overlapping locations") }
            precondition(m.kind == .legacy || m.version >= 1)
            precondition(keys.isEmpty || m.signatureVerified, "unsigned manifest accepted with keys set")
        }
    }
    return 0
}
