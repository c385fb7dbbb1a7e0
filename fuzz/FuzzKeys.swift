// libFuzzer target: key documents (KeyDocument.decode and the checks a client makes of a
// fetched document) and rollouts (Rollout.decode).
// Invariants: never crash; a decoded document has 1 to 16 distinct keys per role and
// thresholds within them; verifying it against a fixed previous document never accepts it
// unless a threshold of that document's root keys signed its exact payload (none can here:
// the fuzzer holds no private key); a decoded rollout has shares from 0 to 100 and steps in
// strictly increasing time, and survives encode/decode.

private let previous = KeyDocument.pinned([[UInt8](repeating: 7, count: 32)])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeys(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let doc = try? KeyDocument.decode(bytes, source: "fuzz") {
        for set in [doc.root, doc.signing] {
            precondition((1...KeySet.maxKeys).contains(set.keys.count), "a role with \(set.keys.count) keys")
            precondition(Set(set.keys).count == set.keys.count, "a key listed twice")
            precondition(set.threshold >= 1 && set.threshold <= set.keys.count, "threshold \(set.threshold) of \(set.keys.count)")
        }
        precondition((try? doc.verify(after: previous, source: "fuzz")) == nil, "a document accepted without the root key's signature")
    }
    if let json = try? JSONParser.parse(bytes), let r = try? Rollout.decode(json, source: "fuzz") {
        precondition(Rollout.isValidPercent(r.percent) && r.schedule.allSatisfy { Rollout.isValidPercent($0.percent) }, "share out of range")
        for (a, b) in zip(r.schedule, r.schedule.dropFirst()) { precondition(a.at < b.at, "steps out of order") }
        let again = try? Rollout.decode(r.toJSON(), source: "fuzz")
        precondition(again.map { $0.schedule.map(\.at) == r.schedule.map(\.at) } ?? false, "a rollout did not survive encode/decode")
    }
    return 0
}
