// libFuzzer target: key documents (KeyDocument.decode and the checks a client makes of a
// fetched document), rollouts (Rollout.decode), and a channel's signing fields (revision,
// signed) with the order and the vouching rules built on them.
// Invariants: never crash; a decoded document has 1 to 16 distinct keys per role and
// thresholds within them; verifying it against a fixed previous document never accepts it
// unless a threshold of that document's root keys signed its exact payload (none can here:
// the fuzzer holds no private key); a role vouches for its own keys, for any threshold of
// itself, and never for no signer; the pinned keys vouch for no threshold of a document that
// lacks them; a decoded rollout has shares from 0 to 100 and steps in strictly increasing
// time, and survives encode/decode; a decoded revision is >= 0, orders after revision 0 of its
// version and before the next version, and the content digest ignores every signing field.

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
        precondition(doc.signing.isMet(bySigners: doc.signing.keys) && doc.signing.isMet(byAnyThresholdOf: doc.signing), "a role does not vouch for itself")
        precondition(!doc.signing.isMet(bySigners: []), "no signer vouched")
        if !doc.signing.keys.contains(previous.signing.keys[0]) {
            precondition(!doc.signing.isMet(byAnyThresholdOf: previous.signing), "a retired key vouched")
            precondition(!doc.signing.isMet(bySigners: previous.signing.keys), "a retired key's signature counted")
        }
    }
    if let json = try? JSONParser.parse(bytes), let r = try? Rollout.decode(json, source: "fuzz") {
        precondition(Rollout.isValidPercent(r.percent) && r.schedule.allSatisfy { Rollout.isValidPercent($0.percent) }, "share out of range")
        for (a, b) in zip(r.schedule, r.schedule.dropFirst()) { precondition(a.at < b.at, "steps out of order") }
        let again = try? Rollout.decode(r.toJSON(), source: "fuzz")
        precondition(again.map { $0.schedule.map(\.at) == r.schedule.map(\.at) } ?? false, "a rollout did not survive encode/decode")
    }
    if let json = try? JSONParser.parse(bytes), json.isObject, let signing = try? Manifest.decodeSigning(json, source: "fuzz") {
        precondition(signing.revision >= 0, "a negative revision")
        let order = ManifestOrder(version: 5, revision: signing.revision)
        precondition(ManifestOrder(version: 5) <= order && order < ManifestOrder(version: 6), "the revision orders across versions")
        var resigned = json
        for (field, value) in [("revision", JSON.int(signing.revision &+ 1)), ("signed", .string("2030-01-01T00:00:00Z")),
                               ("expires", .null), ("channel", .string("beta")), ("rollout", .null), ("keys", .null)] {
            resigned = resigned.setting(field, value)
        }
        precondition(Manifest.contentDigest(json) == Manifest.contentDigest(resigned), "a signing field changed what the release is")
        precondition(Manifest.contentDigest(json) != Manifest.contentDigest(json.setting("label", .string("\(bytes.count)x"))) || json["label"] == .string("\(bytes.count)x"),
                     "the content digest ignores a release field")
    }
    return 0
}
