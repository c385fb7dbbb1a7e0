internal import CCrypto

/// Ed25519 keys and signatures on libcrypto, and DSSE's pre-authentication encoding.
package enum Ed25519 {
    package static let keyLength = 32
    package static let signatureLength = 64

    /// A new private key seed (32 random bytes) and its public key.
    package static func generate() throws -> (seed: [UInt8], publicKey: [UInt8]) {
        var pkey: OpaquePointer?
        guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nil) else {
            throw AssetPatchError(.internal, "EVP_PKEY_CTX_new_id: \(cryptoErrorText())")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_keygen(ctx, &pkey) == 1, let key = pkey else {
            throw AssetPatchError(.internal, "Ed25519 key generation: \(cryptoErrorText())")
        }
        defer { EVP_PKEY_free(key) }
        var seed = [UInt8](repeating: 0, count: keyLength)
        var pub = [UInt8](repeating: 0, count: keyLength)
        var n = keyLength
        guard EVP_PKEY_get_raw_private_key(key, &seed, &n) == 1, n == keyLength else {
            throw AssetPatchError(.internal, "Ed25519 private key: \(cryptoErrorText())")
        }
        n = keyLength
        guard EVP_PKEY_get_raw_public_key(key, &pub, &n) == 1, n == keyLength else {
            throw AssetPatchError(.internal, "Ed25519 public key: \(cryptoErrorText())")
        }
        return (seed, pub)
    }

    package static func publicKey(fromSeed seed: [UInt8]) throws -> [UInt8] {
        guard seed.count == keyLength, let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, seed.count) else {
            throw AssetPatchError(.argument, "not an Ed25519 private key (need 32 bytes)")
        }
        defer { EVP_PKEY_free(key) }
        var pub = [UInt8](repeating: 0, count: keyLength)
        var n = keyLength
        guard EVP_PKEY_get_raw_public_key(key, &pub, &n) == 1 else {
            throw AssetPatchError(.internal, "Ed25519 public key: \(cryptoErrorText())")
        }
        return pub
    }

    package static func sign(_ message: [UInt8], seed: [UInt8]) throws -> [UInt8] {
        guard seed.count == keyLength, let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, seed.count) else {
            throw AssetPatchError(.argument, "not an Ed25519 private key (need 32 bytes)")
        }
        defer { EVP_PKEY_free(key) }
        guard let ctx = EVP_MD_CTX_new() else { throw AssetPatchError(.internal, "EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(ctx) }
        var sig = [UInt8](repeating: 0, count: signatureLength)
        var n = signatureLength
        guard EVP_DigestSignInit(ctx, nil, nil, nil, key) == 1,
              EVP_DigestSign(ctx, &sig, &n, message, message.count) == 1, n == signatureLength else {
            throw AssetPatchError(.internal, "Ed25519 signing: \(cryptoErrorText())")
        }
        return sig
    }

    /// True only for a valid signature of `message` by `publicKey`; never throws on bad input.
    package static func verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard publicKey.count == keyLength, signature.count == signatureLength,
              let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count) else {
            ERR_clear_error()
            return false
        }
        defer { EVP_PKEY_free(key) }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        let ok = EVP_DigestVerifyInit(ctx, nil, nil, nil, key) == 1
            && EVP_DigestVerify(ctx, signature, signature.count, message, message.count) == 1
        ERR_clear_error()
        return ok
    }

    /// The DSSE key id: the first 16 hex digits of sha256(public key).
    package static func keyID(_ publicKey: [UInt8]) -> String {
        String(Digest.sha256Hex(publicKey).prefix(16))
    }
}

package enum DSSE {
    package static let payloadType = "application/vnd.assetpatch.manifest+json"

    /// The envelope of `payload` signed with each of the private keys `seeds` (several for a
    /// threshold): what `publish --key` writes.
    package static func seal(_ payload: [UInt8], seeds: [[UInt8]], payloadType: String = DSSE.payloadType) throws -> JSON {
        var signatures: [JSON] = []
        for seed in seeds {
            let pub = try Ed25519.publicKey(fromSeed: seed)
            let sig = try Ed25519.sign(pae(payloadType: payloadType, payload: payload), seed: seed)
            signatures.append(.object([("keyid", .string(Ed25519.keyID(pub))), ("sig", .string(Base64.encode(sig)))]))
        }
        return .object([
            ("payloadType", .string(payloadType)),
            ("payload", .string(Base64.encode(payload))),
            ("signatures", .array(signatures)),
        ])
    }

    package static func seal(_ payload: [UInt8], seed: [UInt8]) throws -> JSON { try seal(payload, seeds: [seed]) }

    /// `"DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload`.
    package static func pae(payloadType: String, payload: [UInt8]) -> [UInt8] {
        let type = Array(payloadType.utf8)
        return Array("DSSEv1 \(type.count) ".utf8) + type + Array(" \(payload.count) ".utf8) + payload
    }
}
