// libFuzzer target: deltas (Archive/Delta.swift) and delta pages (Manifest/DeltaIndex.swift).
// Invariants: never crash; the applier never writes past its target's size nor reads outside
// its base, and accepts only instructions that make exactly the target's size; a delta page
// decodes only to targets in strictly increasing order whose deltas fill the file; the encoder's
// delta from any base to any target applies back to exactly that target.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDelta(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard bytes.count >= 2 else { return 0 }
    // The input as instructions against a base of 300 bytes, for a target of the first byte's size.
    let base = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let targetSize = UInt64(bytes[0]) * 3
    var written: UInt64 = 0
    let applier = DeltaApplier(targetSize: targetSize, baseSize: UInt64(base.count), readBase: { at, buffer in
        precondition(at + UInt64(buffer.count) <= UInt64(base.count), "a copy outside the base")
        base.withUnsafeBytes { b in buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: b[Int(at)..<(Int(at) + buffer.count)])) }
    }, write: { piece in
        written += UInt64(piece.count)
        precondition(written <= targetSize, "written past the target")
    })
    let ok: Bool = {
        do {
            try bytes[1...].withUnsafeBytes { try applier.push($0) }
            try applier.finish()
            return true
        } catch { return false }
    }()
    if ok { precondition(written == targetSize, "a delta accepted short of its target") }
    // The input as a delta page.
    if let entries = try? DeltaPage.decode(bytes, fileSize: UInt64(size) + 1000, pageSize: UInt64(size), source: "fuzz") {
        var end = UInt64(size)
        for (i, e) in entries.enumerated() {
            precondition(e.offset == end && e.length > 0, "deltas that do not follow each other")
            end += e.length
            if i > 0 { precondition(entries[i - 1].target.lexicographicallyPrecedes(e.target), "targets out of order") }
        }
        precondition(end == UInt64(size) + 1000, "deltas that do not fill the file")
    }
    // The input's halves as a base and a target: the encoder's delta makes the target.
    let half = bytes.count / 2
    let b = Array(bytes[..<half]), t = Array(bytes[half...])
    let instructions = b.withUnsafeBytes { bb in t.withUnsafeBytes { tt in DeltaEncoder.encode(base: bb, target: tt) } }
    var out: [UInt8] = []
    let again = DeltaApplier(targetSize: UInt64(t.count), baseSize: UInt64(b.count), readBase: { at, buffer in
        b.withUnsafeBytes { bb in buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bb[Int(at)..<(Int(at) + buffer.count)])) }
    }, write: { out.append(contentsOf: $0) })
    do {
        try instructions.withUnsafeBytes { try again.push($0) }
        try again.finish()
    } catch {
        fatalError("the encoder's delta was refused: \(error)")
    }
    precondition(out == t, "the encoder's delta made other bytes")
    return 0
}
