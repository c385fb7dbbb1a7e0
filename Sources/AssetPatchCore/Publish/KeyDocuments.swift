import Glibc

/// The repository's key documents (`keys/<version>.json`) as the publisher makes them: a new
/// document is staged (`keys/staged.json`, or any file), signed by each root key holder on
/// their own machine (`keys sign`), and published once the thresholds are met.
package enum KeyDocuments {
    package static let directoryName = "keys"

    /// The published documents' versions, ascending.
    package static func versions(repo: String) -> [Int64] {
        ((try? FS.list(repo + "/" + directoryName)) ?? []).compactMap { name -> Int64? in
            guard name.hasSuffix(".json"), let v = Int64(name.dropLast(5)), v >= 1, "\(v).json" == name else { return nil }
            return v
        }.sorted()
    }

    package static func load(repo: String, version: Int64) throws -> KeyDocument {
        let path = repo + "/\(directoryName)/\(version).json"
        let doc = try KeyDocument.decode(try FS.readFile(path, limit: KeyDocument.maxBytes, limitStatus: .signature), source: path)
        guard doc.version == version else { throw AssetPatchError(.signature, "\(path): says version \(doc.version)") }
        return doc
    }

    /// The newest published document, nil when the repository has none (manifests are then
    /// judged by the keys clients pin).
    package static func newest(repo: String) throws -> KeyDocument? {
        guard let v = versions(repo: repo).last else { return nil }
        return try load(repo: repo, version: v)
    }

    /// Manifests signed by `seeds` must satisfy `doc`'s signing role: refused here rather than
    /// by every client.
    static func checkSigners(_ seeds: [[UInt8]], against doc: KeyDocument) throws {
        let pubs = Set(try seeds.map { try Ed25519.publicKey(fromSeed: $0) })
        let signing = doc.signing.keys.filter { pubs.contains($0) }.count
        guard signing >= doc.signing.threshold else {
            throw AssetPatchError(.argument, "key document \(doc.version) needs manifests signed by \(doc.signing.described); the keys given include \(signing) of them")
        }
    }

    /// A new document, version newest + 1, without signatures yet.
    package static func create(repo: String, root: KeySet, signing: KeySet, expires: Int64) throws -> KeyDocument {
        guard expires > unixTime() else { throw AssetPatchError(.argument, "--expires: \(RFC3339.format(expires)) is in the past") }
        return KeyDocument(version: (versions(repo: repo).last ?? 0) + 1, expires: expires, root: root, signing: signing)
    }

    /// Publishes a signed document as `keys/<version>.json`: it must follow the newest published
    /// one (the next version, signed by a threshold of its root keys) and carry a threshold of
    /// its own root keys' signatures. The first document's predecessor is what clients pin:
    /// `pinned` (their `public_keys`), one of which must have signed it when given.
    package static func publish(_ doc: KeyDocument, repo: String, pinned: [[UInt8]], dryRun: Bool = false) throws -> String {
        let newest = versions(repo: repo).last ?? 0
        guard doc.version == newest + 1 else {
            throw AssetPatchError(.argument, "the document is version \(doc.version); the repository's next is \(newest + 1)")
        }
        if newest > 0 {
            try doc.verify(after: try load(repo: repo, version: newest), source: "version \(doc.version)")
        } else if !pinned.isEmpty {
            try doc.verify(after: KeyDocument.pinned(pinned), source: "version \(doc.version)")
        } else {
            try doc.verifySelf(source: "version \(doc.version)")
        }
        let dir = repo + "/" + directoryName
        let path = dir + "/\(doc.version).json"
        if dryRun { return path }
        try FS.makeDirectories(dir)
        try FS.writeAtomically(path, doc.serialized())
        try FS.syncDirectory(dir)
        return path
    }

    /// What signing `doc` still needs, for people: "its own root keys: 1 more signature, by
    /// 3f2a…". A signature counts for every role its key is in (one key that is a root key of
    /// both documents signs once for both).
    package static func missing(_ doc: KeyDocument, repo: String?) -> [String] {
        var out: [String] = []
        func need(_ set: KeySet, _ what: String) {
            let signed = set.signers(payloadType: KeyDocument.payloadType, payload: doc.payload, signatures: doc.signatures)
            guard signed.count < set.threshold else { return }
            let n = set.threshold - signed.count
            let left = set.keys.indices.filter { !signed.contains($0) }.map { Ed25519.keyID(set.keys[$0]) }
            out.append("\(what): \(n) more signature\(n == 1 ? "" : "s"), by \(n == left.count ? "" : "any \(n) of ")\(left.joined(separator: ", "))")
        }
        need(doc.root, "its own root keys")
        if let repo, doc.version > 1, let previous = try? load(repo: repo, version: doc.version - 1) {
            need(previous.root, "the root keys of document \(previous.version)")
        } else if doc.version == 1 {
            out.append("a key clients pin (public_keys), unless they pin this document itself: one signature (keys publish --pinned-key checks it)")
        }
        return out
    }
}

extension KeyDocuments {
    /// How a document with `root` and `signing` would be weaker than `previous`: root keys
    /// dropped, thresholds lowered. Signing keys replaced are a rotation, not a weakening.
    package static func weakenings(from previous: KeyDocument, root: KeySet, signing: KeySet) -> [String] {
        var out: [String] = []
        let dropped = previous.root.keys.filter { !root.keys.contains($0) }
        if !dropped.isEmpty { out.append("root key\(dropped.count == 1 ? "" : "s") \(dropped.map(Ed25519.keyID).joined(separator: ", ")) dropped") }
        if root.threshold < previous.root.threshold { out.append("root threshold lowered from \(previous.root.threshold) to \(root.threshold)") }
        if signing.threshold < previous.signing.threshold {
            out.append("signing threshold lowered from \(previous.signing.threshold) to \(signing.threshold)")
        }
        return out
    }

    /// A document as a root-key holder must see it before signing: its version and expiry, each
    /// role's keys (by id) and threshold, and what changes from `previous`.
    package static func describe(_ doc: KeyDocument, previous: KeyDocument?) -> [String] {
        func ids(_ set: KeySet) -> String { set.keys.map(Ed25519.keyID).joined(separator: ", ") }
        var lines = ["key document \(doc.version), expires \(doc.expires.map(RFC3339.format) ?? "never")",
                     "  root keys (\(doc.root.threshold) of \(doc.root.keys.count) needed): \(ids(doc.root))",
                     "  signing keys (\(doc.signing.threshold) of \(doc.signing.keys.count) needed): \(ids(doc.signing))"]
        guard let previous else {
            lines.append("  follows: the keys clients pin (public_keys), or nothing for clients that pin this document itself")
            return lines
        }
        var changes: [String] = []
        for (role, old, new) in [("root", previous.root, doc.root), ("signing", previous.signing, doc.signing)] {
            for k in new.keys where !old.keys.contains(k) { changes.append("\(role) key \(Ed25519.keyID(k)) added") }
            for k in old.keys where !new.keys.contains(k) { changes.append("\(role) key \(Ed25519.keyID(k)) removed") }
            if old.threshold != new.threshold {
                changes.append("\(role) threshold \(old.threshold) -> \(new.threshold)\(new.threshold < old.threshold ? " (LOWERED)" : "")")
            }
        }
        lines.append("  changes from document \(previous.version): " + (changes.isEmpty ? "none but the expiry" : changes.joined(separator: "; ")))
        return lines
    }
}
