import Glibc

/// Dotted application versions: `1.10.0` > `1.9.3`, missing parts are 0.
package enum AppVersion {
    /// Whether `app` lies within `min...max` (either bound optional; unparseable bounds are
    /// refused when the manifest is decoded).
    package static func fits(_ app: [UInt64], min: String?, max: String?) -> Bool {
        if let min, let m = parse(min), compare(app, m) < 0 { return false }
        if let max, let m = parse(max), compare(app, m) > 0 { return false }
        return true
    }

    package static func parse(_ text: String) -> [UInt64]? {
        guard !text.isEmpty, text.utf8.count <= 128 else { return nil }
        var parts: [UInt64] = []
        for p in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard !p.isEmpty, p.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let v = UInt64(p) else { return nil }
            parts.append(v)
        }
        return parts
    }

    /// -1, 0 or 1.
    package static func compare(_ a: [UInt64], _ b: [UInt64]) -> Int {
        for i in 0..<max(a.count, b.count) {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            if x != y { return x < y ? -1 : 1 }
        }
        return 0
    }
}
