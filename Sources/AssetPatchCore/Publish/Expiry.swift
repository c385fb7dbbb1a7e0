/// When a channel's signed manifests expire. Clients refuse an expired manifest
/// (`ERR_EXPIRED`), so a manifest a cache or a mirror holds back stops working after its
/// lifetime (TUF's freeze attack): every signing of a channel sets a new expiry, counted from
/// the signing.
package enum Expiry: Sendable, Equatable {
    /// 90 days after the signing: what `publish` writes unless told otherwise.
    case standard
    /// The channel's current lifetime (its `expires` minus when it was signed), counted from
    /// now; never when a 0.5 publisher signed it without expiry (`--expires never`); `standard`
    /// for a channel without a manifest yet, or one signed before 0.5 without expiry.
    case keep
    /// This long after the signing (seconds).
    case after(Int64)
    case at(Int64)
    /// The manifests stay valid for ever: a replay of any of them works as long as clients
    /// accept its version.
    case never

    package static let standardLifetime: Int64 = 90 * 86400

    /// "90d", "12h", "30m", "1w", an RFC 3339 time, or "never".
    package init?(_ text: String) {
        if text == "never" { self = .never; return }
        if let t = RFC3339.parse(text) { self = .at(t); return }
        guard let unit = text.last, let n = Int64(text.dropLast()), n > 0, n < 100 * 365 else { return nil }
        switch unit {
        case "m": self = .after(n * 60)
        case "h": self = .after(n * 3600)
        case "d": self = .after(n * 86400)
        case "w": self = .after(n * 7 * 86400)
        default: return nil
        }
    }

    /// The `expires` time for a signing at `now` (nil: none). `current`: the channel's manifest
    /// payload before this signing.
    package func time(now: Int64, current: JSON?) throws -> Int64? {
        switch self {
        case .standard: return now + Expiry.standardLifetime
        case let .after(d): return now + d
        case let .at(t):
            guard t > now else { throw AssetPatchError(.argument, "--expires: \(RFC3339.format(t)) is in the past") }
            return t
        case .never: return nil
        case .keep:
            guard let current else { return now + Expiry.standardLifetime }
            guard let expires = current["expires"]?.string.flatMap(RFC3339.parse) else {
                return current["signed"] == nil ? now + Expiry.standardLifetime : nil
            }
            let since = (current["signed"] ?? current["created"])?.string.flatMap(RFC3339.parse)
            guard let since, expires > since else { return now + Expiry.standardLifetime }
            return now + (expires - since)
        }
    }
}
