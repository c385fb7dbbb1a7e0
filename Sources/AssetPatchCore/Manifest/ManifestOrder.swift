/// Where a signed manifest stands among its channel's: the release's version, then the channel's
/// revision, which every signing of the channel raises (a publish, a promotion, a rollout change,
/// a halt, a re-signing). Two manifests a channel offered are always ordered, so a client that
/// saw a halt takes the manifests signed before it for what they are: older.
package struct ManifestOrder: Sendable, Equatable, Comparable, CustomStringConvertible {
    package var version: Int64
    /// 0 for manifests signed before revisions existed.
    package var revision: Int64

    package init(version: Int64, revision: Int64 = 0) {
        self.version = version
        self.revision = revision
    }

    package static let zero = ManifestOrder(version: 0)

    package static func < (a: ManifestOrder, b: ManifestOrder) -> Bool {
        (a.version, a.revision) < (b.version, b.revision)
    }

    package var description: String { revision == 0 ? "version \(version)" : "version \(version) (revision \(revision))" }
}

extension Manifest {
    /// The fields a channel's signing sets: what the release is does not depend on them, so two
    /// manifests that differ only in them describe the same release (`contentDigest`). `head`
    /// names the channel's head beside its `manifest.json`.
    package static let signingFields = ["channel", "rollout", "keys", "revision", "signed", "expires", "head"]

    /// The manifest's place in its channel.
    package var order: ManifestOrder { ManifestOrder(version: version, revision: revision) }

    /// sha256 of the payload without `signingFields` and the archive's and delta files' URLs (relative to each
    /// channel's directory; the archive's size and sha256 name it): the same for every signing
    /// of one release (a halt, a promotion, a re-signing after a key rotation), different for
    /// anything else.
    static func contentDigest(_ payload: JSON) -> String {
        var j = payload
        for field in signingFields { j = j.removing(field) }
        if let archive = j["archive"] { j = j.setting("archive", archive.removing("url")) }
        // Delta files' URLs are relative to the channel's directory too (their sha256 names them).
        if let index = j["index"], let deltas = index["deltas"]?.array {
            j = j.setting("index", index.setting("deltas", .array(deltas.map { $0.removing("url") })))
        }
        return Digest.sha256Hex(Array(j.serialized(indent: 0).utf8))
    }

    /// `revision` (a whole number >= 0, absent: 0) and `signed` (an RFC 3339 time).
    static func decodeSigning(_ json: JSON, source: String) throws -> (revision: Int64, signed: Int64?) {
        var revision: Int64 = 0
        if let v = json["revision"], v != .null {
            guard let n = v.int64, n >= 0 else { throw fail("\(source): \"revision\" must be a whole number >= 0") }
            revision = n
        }
        var signed: Int64?
        if let v = json["signed"], v != .null {
            guard let text = v.string, let t = RFC3339.parse(text) else { throw fail("\(source): \"signed\" must be an RFC 3339 time") }
            signed = t
        }
        return (revision, signed)
    }
}
