// libFuzzer target: release index pages (IndexPage.decode, the deflated form IndexPage.unseal
// reads) and heads (format-2 manifests with their `index` object).
// Invariants: never crash; a decoded page encodes back to bytes that decode to the same page
// (file tables at their base); a file table holds only safe paths in strictly increasing byte
// order with locations whose data follows their header; a chunk list only chunks of 1 byte to
// the largest chunk size; unseal returns only bytes whose sha256 is the reference's; a head's
// linked tree lies inside its index, after the root.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIndex(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let page = try? IndexPage.decode(bytes, source: "fuzz") {
        switch page {
        case let .files(files):
            var previous: [UInt8]?
            for f in files {
                precondition(ResourceName.isValid(f.file.path), "unsafe path accepted: \(f.file.path)")
                let path = Array(f.file.path.utf8)
                if let previous { precondition(previous.lexicographicallyPrecedes(path), "paths out of order") }
                previous = path
                let l = f.file.location!
                precondition(l.dataOffset >= l.headerOffset + 30, "data before the end of its header")
            }
            let base = IndexPage.base(of: files)
            guard let again = try? IndexPage.decode(page.encode(), source: "fuzz", base: base), again == page else {
                fatalError("a file table did not survive encode/decode at its base")
            }
        case let .chunks(chunks):
            for c in chunks { precondition(c.size > 0 && Int(c.size) <= IndexPage.maxChunkBytes, "impossible chunk accepted") }
            guard let again = try? IndexPage.decode(page.encode(), source: "fuzz"), again == page else {
                fatalError("a chunk list did not survive encode/decode")
            }
        case .root:
            guard let again = try? IndexPage.decode(page.encode(), source: "fuzz"), again == page else {
                fatalError("a root did not survive encode/decode")
            }
        }
    }
    // The input as a stored page: named by the sha256 of what it inflates to, it must come back
    // exactly; named by anything else, it must be refused.
    if let inflated = try? RawDeflate.decompress(bytes, limit: IndexPage.maxBytes), let d = try? Digest(.sha256) {
        d.update(inflated)
        let ref = PageRef(sha256: d.finalBytes(), compressedSize: UInt32(min(bytes.count, Int(UInt32.max))))
        if let out = try? IndexPage.unseal(bytes, ref, source: "fuzz") { precondition(out == inflated, "unseal changed the bytes") }
        var wrong = ref
        wrong.sha256[0] ^= 1
        precondition((try? IndexPage.unseal(bytes, wrong, source: "fuzz")) == nil, "a page that does not match its reference was accepted")
    }
    // The input as a head.
    if let m = try? Manifest.decode(bytes), let index = m.index {
        precondition(m.kind == .format2 && m.files.isEmpty, "a head with files")
        precondition(index.offset + index.size <= (m.archiveSize ?? 0), "index past the archive")
        precondition(UInt64(index.root.compressedSize) <= index.size, "root larger than the index")
        if let linked = index.linked {
            precondition(linked.offset >= index.offset + UInt64(index.root.compressedSize), "linked tree before the end of the root")
            precondition(linked.offset + UInt64(linked.root.compressedSize) <= index.offset + index.size, "linked tree past the index")
        }
    }
    return 0
}
