import Glibc

/// Keys and how many of them must sign: a key document's root or signing role, or the keys a
/// host pins with `public_keys` (threshold 1).
package struct KeySet: Sendable, Equatable {
    package static let maxKeys = 16

    package var keys: [[UInt8]]
    package var threshold: Int

    package init(keys: [[UInt8]], threshold: Int) {
        self.keys = keys
        self.threshold = threshold
    }

    /// The members with a valid signature over `payload` (as DSSE signs it) among `signatures`.
    /// A key counts once however often it signed; at most 32 signatures are looked at.
    package func signers(payloadType: String, payload: [UInt8], signatures: [JSON]) -> Set<Int> {
        let message = DSSE.pae(payloadType: payloadType, payload: payload)
        let ids = keys.map(Ed25519.keyID)
        var found = Set<Int>()
        for item in signatures.prefix(32) {
            guard found.count < keys.count, let text = item["sig"]?.string, let sig = Base64.decode(text) else { continue }
            // keyid is only a hint: the key it names first, then the others not yet counted.
            var order = keys.indices.filter { !found.contains($0) }
            if let hint = item["keyid"]?.string, let named = ids.firstIndex(of: hint), let at = order.firstIndex(of: named) {
                order.remove(at: at)
                order.insert(named, at: 0)
            }
            if let i = order.first(where: { Ed25519.verify(sig, of: message, publicKey: keys[$0]) }) { found.insert(i) }
        }
        return found
    }

    package func isMet(payloadType: String, payload: [UInt8], signatures: [JSON]) -> Bool {
        signers(payloadType: payloadType, payload: payload, signatures: signatures).count >= threshold
    }

    package var described: String { "\(threshold) of \(keys.count) key\(keys.count == 1 ? "" : "s") (\(keys.map(Ed25519.keyID).joined(separator: ", ")))" }

    static func decode(_ v: JSON?, _ role: String, source: String) throws -> KeySet {
        func fail(_ what: String) -> AssetPatchError { AssetPatchError(.signature, "\(source): \(role)\(what)") }
        guard let v, v.isObject, let items = v["keys"]?.array, !items.isEmpty, items.count <= maxKeys else {
            throw fail(" needs \"keys\": 1 to \(maxKeys) base64 Ed25519 public keys")
        }
        var keys: [[UInt8]] = []
        for item in items {
            guard let text = item.string, let key = Base64.decode(text), key.count == Ed25519.keyLength else {
                throw fail(".keys holds something that is not a base64 Ed25519 public key")
            }
            guard !keys.contains(key) else { throw fail(".keys names key \(Ed25519.keyID(key)) twice") }
            keys.append(key)
        }
        guard let t = v["threshold"]?.int64, t >= 1, t <= Int64(keys.count) else {
            throw fail(".threshold must be a whole number from 1 to the number of keys (\(keys.count))")
        }
        return KeySet(keys: keys, threshold: Int(t))
    }

    func toJSON() -> JSON {
        .object([("threshold", .int(Int64(threshold))), ("keys", .array(keys.map { .string(Base64.encode($0)) }))])
    }
}

/// A signed key document (`keys/<version>.json` of a repository): which keys sign manifests, and
/// which keys sign the next key document. Each document is signed by a threshold of the
/// previous document's root keys and by a threshold of its own, so a client that trusts one
/// document can follow the chain to the newest, and a signing key rotated out signs nothing
/// that client accepts afterwards.
///
/// Payload (DSSE payloadType `application/vnd.assetpatch.keys+json`):
/// `{"type": "assetpatch-keys", "version": N, "expires": "<RFC 3339>", "root": {"threshold": k,
/// "keys": [...]}, "signing": {"threshold": k, "keys": [...]}}`.
package struct KeyDocument: Sendable, Equatable {
    package static let payloadType = "application/vnd.assetpatch.keys+json"
    package static let maxBytes = 1 << 20

    package var version: Int64
    /// nil only for the pseudo-document made of pinned `public_keys`.
    package var expires: Int64?
    package var root: KeySet
    package var signing: KeySet
    /// The payload's bytes (what the signatures cover).
    package var payload: [UInt8]
    package var signatures: [JSON]

    package init(version: Int64, expires: Int64?, root: KeySet, signing: KeySet) {
        self.version = version
        self.expires = expires
        self.root = root
        self.signing = signing
        self.payload = []
        self.signatures = []
        self.payload = Array((payloadJSON().serialized(indent: 2) + "\n").utf8)
    }

    /// What a host pinning `public_keys` trusts: version 0, each key alone signs manifests and
    /// the first key document.
    package static func pinned(_ keys: [[UInt8]]) -> KeyDocument {
        var d = KeyDocument(version: 0, expires: nil, root: KeySet(keys: keys, threshold: 1), signing: KeySet(keys: keys, threshold: 1))
        d.payload = []
        return d
    }

    /// Names the trust a chain starts from: a different anchor (the host pinned other keys)
    /// means documents followed from the old one are followed again.
    package var identity: String {
        var bytes = Array("\(version)/\(root.threshold)/\(signing.threshold)/".utf8)
        for k in root.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) { bytes += k }
        bytes += Array("/".utf8)
        for k in signing.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) { bytes += k }
        return Digest.sha256Hex(bytes)
    }

    func payloadJSON() -> JSON {
        var pairs: [(String, JSON)] = [("type", .string("assetpatch-keys")), ("version", .int(version))]
        if let expires { pairs.append(("expires", .string(RFC3339.format(expires)))) }
        pairs += [("root", root.toJSON()), ("signing", signing.toJSON())]
        return .object(pairs)
    }

    /// The envelope as the repository stores it.
    package func envelope() -> JSON {
        .object([("payloadType", .string(KeyDocument.payloadType)), ("payload", .string(Base64.encode(payload))),
                 ("signatures", .array(signatures))])
    }

    package func serialized() -> [UInt8] { Array((envelope().serialized(indent: 2) + "\n").utf8) }

    /// Decodes an envelope; signatures are not checked here (`verify`).
    package static func decode(_ bytes: [UInt8], source: String) throws -> KeyDocument {
        func fail(_ what: String) -> AssetPatchError { AssetPatchError(.signature, "\(source): \(what)") }
        guard bytes.count <= maxBytes else { throw fail("a key document larger than 1 MiB") }
        let json: JSON
        do { json = try JSONParser.parse(bytes) } catch { throw fail("not valid JSON: \(JSONParser.describe(error))") }
        guard json["payloadType"]?.string == payloadType else { throw fail("not a key document (payloadType \"\(payloadType)\")") }
        guard let text = json["payload"]?.string, let payload = Base64.decode(text) else { throw fail("payload is not base64") }
        let inner: JSON
        do { inner = try JSONParser.parse(payload) } catch { throw fail("payload is not valid JSON: \(JSONParser.describe(error))") }
        guard inner["type"]?.string == "assetpatch-keys" else { throw fail("payload \"type\" is not \"assetpatch-keys\"") }
        guard let version = inner["version"]?.int64, version >= 1 else { throw fail("\"version\" must be a whole number >= 1") }
        guard let e = inner["expires"]?.string, let expires = RFC3339.parse(e) else { throw fail("\"expires\" must be an RFC 3339 time") }
        var d = KeyDocument(version: version, expires: expires, root: try KeySet.decode(inner["root"], "root", source: source),
                            signing: try KeySet.decode(inner["signing"], "signing", source: source))
        d.payload = payload
        d.signatures = json["signatures"]?.array ?? []
        return d
    }

    /// Checks that a threshold of `previous` root keys and a threshold of this document's own
    /// root keys signed it (ERR_SIGNATURE otherwise). Expiry is the caller's: only the newest
    /// document of a chain has to be current.
    package func verify(after previous: KeyDocument, source: String) throws {
        guard version > previous.version else {
            throw AssetPatchError(.signature, "\(source): key document version \(version) does not follow version \(previous.version)")
        }
        let byPrevious = previous.root.signers(payloadType: KeyDocument.payloadType, payload: payload, signatures: signatures).count
        guard byPrevious >= previous.root.threshold else {
            throw AssetPatchError(.signature, "\(source): key document \(version) is signed by \(byPrevious) of the root keys of version \(previous.version), which needs \(previous.root.threshold)")
        }
        try verifySelf(source: source)
    }

    /// A threshold of its own root keys signed it: what a pinned document must show.
    package func verifySelf(source: String) throws {
        let own = root.signers(payloadType: KeyDocument.payloadType, payload: payload, signatures: signatures).count
        guard own >= root.threshold else {
            throw AssetPatchError(.signature, "\(source): key document \(version) is signed by \(own) of its own root keys, which needs \(root.threshold)")
        }
    }

    /// Adds the signature of the key `seed` (replacing an earlier one by the same key).
    package mutating func sign(seed: [UInt8]) throws {
        let pub = try Ed25519.publicKey(fromSeed: seed)
        let sig = try Ed25519.sign(DSSE.pae(payloadType: KeyDocument.payloadType, payload: payload), seed: seed)
        signatures.removeAll { $0["keyid"]?.string == Ed25519.keyID(pub) }
        signatures.append(.object([("keyid", .string(Ed25519.keyID(pub))), ("sig", .string(Base64.encode(sig)))]))
    }
}

/// A manifest's `keys`: the key document version its signatures are made under, and where the
/// repository keeps the documents (relative to the manifest, e.g. `"keys/"`).
package struct KeyDocumentRef: Sendable, Equatable {
    package var version: Int64
    package var url: String

    package init(version: Int64, url: String) {
        self.version = version
        self.url = url
    }

    static func decode(_ v: JSON, source: String) throws -> KeyDocumentRef {
        guard v.isObject, let version = v["version"]?.int64, version >= 1, let url = v["url"]?.string, !url.isEmpty,
              !url.hasLineBreak, url.hasSuffix("/") else {
            throw AssetPatchError(.manifest, "\(source): \"keys\" must be {\"version\": N >= 1, \"url\": \"<directory>/\"}")
        }
        return KeyDocumentRef(version: version, url: url)
    }

    func toJSON() -> JSON { .object([("version", .int(version)), ("url", .string(url))]) }
}
