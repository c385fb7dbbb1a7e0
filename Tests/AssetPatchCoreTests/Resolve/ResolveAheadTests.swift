import Testing
@testable import AssetPatchCore

/// The table resolved ahead must answer exactly as trying each variant's candidate in the
/// release, then the bundle, would: checked against that rule, written out here, on names
/// chosen to hit the edge cases of the suffix rule.
@Suite struct ResolveAheadTests {
    /// The rule as the header states it, one candidate at a time.
    func reference(_ name: String, release: Set<String>, bundle: Set<String>, variants: [String]) -> (String, Int)? {
        for (i, v) in variants.enumerated() {
            let candidate = v.isEmpty ? name : ResourceName.applyingVariant(name, v)
            if release.contains(candidate) { return ("/r/" + candidate, i) }
            if bundle.contains(candidate) { return ("/b/" + candidate, i) }
        }
        return nil
    }

    @Test func agreesWithTryingEachCandidateInTurn() throws {
        let stems = ["a", "sub/b", "sub/.env", "README", "x/y/z", "a.tar", "d.v1/e", ".hidden", "n"]
        let exts = ["", ".png", ".gz", ".json"]
        let suffixes = ["", "@2x", "@3x", ".hd", "~ipad"]
        var all: [String] = []
        for s in stems { for e in exts { for v in suffixes { all.append(ResourceName.applyingVariant(s + e, v)) } } }
        all = all.filter(ResourceName.isValid)
        var rng = SystemRandomNumberGenerator()
        for round in 0..<40 {
            let release = Set(all.filter { _ in Bool.random(using: &rng) })
            let bundle = Set(all.filter { _ in Int.random(in: 0..<3, using: &rng) == 0 })
            var variants = Array(suffixes.shuffled(using: &rng).prefix(Int.random(in: 1...4, using: &rng)))
            if round % 3 == 0 && !variants.contains("") { variants.append("") }
            let view = ResolveView(release: NameTable(root: "/r", names: Array(release)),
                                   bundle: NameTable(root: "/b", names: Array(bundle)),
                                   variants: variants.map { Array($0.utf8) }, activeVersion: 1)
            for name in Set(all + stems.flatMap { s in exts.map { s + $0 } }) where ResourceName.isValid(name) {
                let want = reference(name, release: release, bundle: bundle, variants: variants)
                var got: (String, Int)?
                var length = 0, variant = -1
                var out = [UInt8](repeating: 0, count: 512)
                let bytes = Array(name.utf8)
                let found = bytes.withUnsafeBytes { n in
                    out.withUnsafeMutableBytes { o in
                        view.resolve(n, into: o.baseAddress, capacity: o.count, length: &length, variant: &variant)
                    }
                }
                if found == .ok { got = (String(decoding: out[..<length], as: UTF8.self), variant) }
                #expect(got?.0 == want?.0 && got?.1 == want?.1, "\(name) with \(variants): got \(String(describing: got)), want \(String(describing: want))")
                if got?.0 != want?.0 { return }
            }
        }
    }
}
