import Glibc

/// A staged rollout: the share of clients that take a release, decided by each client alone.
///
/// `"rollout": {"percent": 10, "schedule": [{"at": "2026-12-01T00:00:00Z", "percent": 50}, …]}`
/// in a manifest offers its release to `percent` % of clients until the first step's time, then
/// to that step's share, and so on (a phased rollout that grows without a new publish). Percent
/// 0 is a halt: no client starts installing the release; clients that installed it keep it.
///
/// A client takes the release iff
/// `int.from_bytes(sha256("<package>/<version>/<rollout_id>")[:8], "big") % 10000 < percent * 100`,
/// so a publisher can predict who gets what, and raising the share never drops a client that
/// qualified before.
package struct Rollout: Sendable, Equatable {
    package struct Step: Sendable, Equatable {
        /// Unix seconds from which `percent` applies.
        package var at: Int64
        package var percent: Double

        package init(at: Int64, percent: Double) {
            self.at = at
            self.percent = percent
        }
    }

    /// The share before the first step (0 to 100, fractions allowed).
    package var percent: Double
    /// Later shares, in strictly increasing time.
    package var schedule: [Step]

    package init(percent: Double, schedule: [Step] = []) {
        self.percent = percent
        self.schedule = schedule
    }

    /// The share in force at `now` (Unix seconds).
    package func percent(at now: Int64) -> Double {
        schedule.last { $0.at <= now }?.percent ?? percent
    }

    /// The client's bucket for a release, 0 to 9999.
    package static func bucket(package: String, version: Int64, rolloutID: String) -> Int {
        let digest = Digest.sha256(Array("\(package)/\(version)/\(rolloutID)".utf8))
        let prefix = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Int(prefix % 10000)
    }

    /// Whether a client in `bucket` takes the release at share `percent`.
    package static func takes(bucket: Int, percent: Double) -> Bool {
        Double(bucket) < percent * 100
    }

    /// The share in basis points (1/100 %), rounded down: what the C API reports.
    package static func basisPoints(_ percent: Double) -> Int32 {
        Int32(max(0, min(10000, (percent * 100).rounded(.down))))
    }

    /// A share: 0 to 100.
    package static func isValidPercent(_ p: Double) -> Bool { p.isFinite && p >= 0 && p <= 100 }

    /// A share as manifests write it: a decimal with at most four fraction digits, no exponent.
    package static func format(_ p: Double) -> String {
        let scaled = Int64((p * 10000).rounded())
        let whole = scaled / 10000, fraction = scaled % 10000
        guard fraction != 0 else { return String(whole) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 4 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }

    static func decode(_ v: JSON, source: String) throws -> Rollout {
        func fail(_ what: String) -> AssetPatchError { AssetPatchError(.manifest, "\(source): rollout\(what)") }
        func share(_ j: JSON?, _ what: String) throws -> Double {
            guard let text = j?.numberText, let p = Double(text), isValidPercent(p) else {
                throw fail("\(what) must be a number from 0 to 100")
            }
            return p
        }
        guard v.isObject else { throw fail(" must be an object") }
        var r = Rollout(percent: try share(v["percent"], ".percent"))
        if let s = v["schedule"], s != .null {
            guard let items = s.array, items.count <= 100 else { throw fail(".schedule must be an array of at most 100 steps") }
            for (i, item) in items.enumerated() {
                guard let text = item["at"]?.string, let at = RFC3339.parse(text) else {
                    throw fail(".schedule[\(i)].at must be an RFC 3339 time")
                }
                if let last = r.schedule.last, at <= last.at { throw fail(".schedule[\(i)].at is not after the step before it") }
                r.schedule.append(Step(at: at, percent: try share(item["percent"], ".schedule[\(i)].percent")))
            }
        }
        return r
    }

    func toJSON() -> JSON {
        var pairs: [(String, JSON)] = [("percent", .number(Rollout.format(percent)))]
        if !schedule.isEmpty {
            pairs.append(("schedule", .array(schedule.map {
                .object([("at", .string(RFC3339.format($0.at))), ("percent", .number(Rollout.format($0.percent)))])
            })))
        }
        return .object(pairs)
    }

    /// For people: "25%", "10%, 50% from 2026-12-01T00:00:00Z, 100% from …".
    package var summary: String {
        ([Rollout.format(percent) + "%"] + schedule.map { "\(Rollout.format($0.percent))% from \(RFC3339.format($0.at))" })
            .joined(separator: ", ")
    }
}
