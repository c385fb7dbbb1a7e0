internal import CCrypto

/// Drains OpenSSL's error queue into one message.
func cryptoErrorText() -> String {
    var parts: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buf = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buf, buf.count)
        parts.append(buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }
    return parts.isEmpty ? "unknown libcrypto error" : parts.joined(separator: "; ")
}

/// A streaming message digest (SHA-256 or MD5) on libcrypto's EVP interface.
/// The EVP_MD_CTX lives on the C heap and is freed with the object.
package final class Digest {
    package enum Algorithm: Sendable { case sha256, md5 }

    private let ctx: OpaquePointer
    package let algorithm: Algorithm

    private var md: OpaquePointer? { algorithm == .sha256 ? EVP_sha256() : EVP_md5() }

    /// Starts over, as if newly created.
    package func reset() {
        _ = EVP_DigestInit_ex(ctx, md, nil)
    }

    package init(_ algorithm: Algorithm) throws {
        guard let ctx = EVP_MD_CTX_new() else { throw AssetPatchError(.internal, "EVP_MD_CTX_new: \(cryptoErrorText())") }
        self.ctx = ctx
        self.algorithm = algorithm
        let md = algorithm == .sha256 ? EVP_sha256() : EVP_md5()
        if EVP_DigestInit_ex(ctx, md, nil) != 1 {
            EVP_MD_CTX_free(ctx)
            throw AssetPatchError(.internal, "EVP_DigestInit_ex: \(cryptoErrorText())")
        }
    }

    deinit { EVP_MD_CTX_free(ctx) }

    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        // EVP_DigestUpdate cannot fail for these in-memory digests once initialised.
        _ = EVP_DigestUpdate(ctx, bytes.baseAddress, bytes.count)
    }

    package func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest as lowercase hex. The object can't be updated afterwards.
    package func finalHex() -> String { Hex.encode(finalBytes()) }

    /// The digest's bytes. The object can't be updated afterwards.
    package func finalBytes() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        var len: UInt32 = 0
        _ = EVP_DigestFinal_ex(ctx, &out, &len)
        return Array(out[0..<Int(len)])
    }

    package static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        guard let d = try? Digest(.sha256) else { return [] }
        d.update(bytes)
        return d.finalBytes()
    }

    package static func sha256Hex(_ bytes: [UInt8]) -> String {
        guard let d = try? Digest(.sha256) else { return "" }
        d.update(bytes)
        return d.finalHex()
    }

    package static func md5(_ bytes: [UInt8]) throws -> [UInt8] {
        let d = try Digest(.md5)
        d.update(bytes)
        return d.finalBytes()
    }

    /// Hashes a whole file, streaming.
    package static func hexOfFile(_ path: String, _ algorithm: Algorithm = .sha256) throws -> String {
        let file = try File.openRead(path)
        let d = try Digest(algorithm)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = try file.read(into: buffer)
            if n == 0 { break }
            d.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        return d.finalHex()
    }
}

package enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    package static func encode<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var chars: [UInt8] = []
        chars.reserveCapacity(bytes.count * 2)
        for b in bytes {
            chars.append(digits[Int(b >> 4)])
            chars.append(digits[Int(b & 15)])
        }
        return String(decoding: chars, as: UTF8.self)
    }

    /// The bytes of a hex string (either case); nil for anything else.
    package static func decode(_ s: String) -> [UInt8]? {
        let u = Array(s.utf8)
        guard u.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 97...102: return c - 87
            case 65...70: return c - 55
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let hi = nibble(u[i]), let lo = nibble(u[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    /// True for exactly `length` lowercase or uppercase hex digits.
    package static func isHex(_ s: String, length: Int) -> Bool {
        s.utf8.count == length && s.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) }
    }
}
