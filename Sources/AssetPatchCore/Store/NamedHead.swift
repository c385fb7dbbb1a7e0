/// The head a `manifest.json` names (`"head": "head.json"`, format.md "The head"), kept so that
/// a client whose host still sets `manifest_url` to a repository's `manifest.json` reads the
/// small head and its paged index from then on, not a manifest that lists every file.
///
/// `DATA_DIR/named-head`, one field a line: the manifest URL it is about; the head's reference
/// as the manifest wrote it (resolved against each source's URL, so mirrors follow too), or
/// nothing; the manifest's order (`version revision`) whose head was declined, or nothing; what
/// identified the copy of the manifest last looked at (`watch`: its ETag, a local file's size
/// and time) and the version its first bytes offered then (`hinted`). A reference is kept only from a
/// manifest the check judged (signature when the client verifies, package, channel, expiry)
/// whose head was not older; a head that failed for a reason a retry does not change is
/// declined for that manifest's order. It only says where to read: the head itself is judged
/// like any manifest.
extension Store {
    var namedHeadPath: String { root + "/named-head" }

    /// What the data directory keeps about the head `manifestURL` names.
    struct NamedHeadRecord: Equatable {
        var manifestURL: String
        var reference: String?
        var declined: ManifestOrder?
        /// The copy of the manifest last looked at, and the version it offered (unverified).
        var watch: String?
        var hinted: Int64?
    }

    func namedHeadRecord(for manifestURL: String? = nil) -> NamedHeadRecord? {
        guard let bytes = try? FS.readFile(namedHeadPath, limit: 64 << 10, followLinks: false) else { return nil }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count >= 5, manifestURL == nil || lines[0] == manifestURL else { return nil }
        func order(_ s: String) -> ManifestOrder? {
            let parts = s.split(separator: " ").compactMap { Int64($0) }
            return parts.count == 2 ? ManifestOrder(version: parts[0], revision: parts[1]) : nil
        }
        return NamedHeadRecord(manifestURL: lines[0], reference: NamedHead.isReference(lines[1]) ? lines[1] : nil,
                               declined: order(lines[2]), watch: lines[3].isEmpty ? nil : lines[3], hinted: Int64(lines[4]))
    }

    /// Writes `r`. Failing to write it costs only bytes.
    func keep(_ r: NamedHeadRecord) {
        guard r != namedHeadRecord(), ![r.manifestURL, r.reference ?? "", r.watch ?? ""].contains(where: \.hasLineBreak) else { return }
        func text(_ o: ManifestOrder?) -> String { o.map { "\($0.version) \($0.revision)" } ?? "" }
        let fields = [r.manifestURL, r.reference ?? "", text(r.declined), r.watch ?? "", r.hinted.map { "\($0)" } ?? ""]
        try? FS.writeAtomically(namedHeadPath, Array(fields.map { $0 + "\n" }.joined().utf8))
    }

    /// The manifest URL a head was kept for, and the head's reference (`status`).
    package func keptNamedHead() -> (manifestURL: String, reference: String)? {
        guard let r = namedHeadRecord(), let reference = r.reference else { return nil }
        return (r.manifestURL, reference)
    }

    func forgetNamedHead() {
        try? FS.unlink(namedHeadPath)
    }
}
