/// The head a `manifest.json` names (`"head": "head.json"`, format.md "The head"), kept so that
/// a client whose host still sets `manifest_url` to a repository's `manifest.json` reads the
/// small head and its paged index from then on, not a manifest that lists every file.
///
/// `DATA_DIR/named-head`: three lines, the manifest URL it is about; the head's reference as
/// the manifest wrote it (resolved against each source's URL, so mirrors follow too), or
/// nothing; and the manifest's order (`version revision`) whose head was declined, or nothing.
/// A reference is kept only from a manifest the check judged (signature when the client
/// verifies, package, channel, expiry) whose head was not older; a head that failed for a
/// reason a retry does not change is declined for that manifest's order, so each check does not
/// fetch both again until the publisher signs the channel anew. It only says where to read:
/// the head itself is judged like any manifest.
extension Store {
    var namedHeadPath: String { root + "/named-head" }

    private struct NamedHeadRecord {
        var manifestURL: String
        var reference: String?
        var declined: ManifestOrder?
    }

    private func namedHeadRecord(for manifestURL: String? = nil) -> NamedHeadRecord? {
        guard let bytes = try? FS.readFile(namedHeadPath, limit: 8 << 10, followLinks: false) else { return nil }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count >= 3, manifestURL == nil || lines[0] == manifestURL else { return nil }
        let reference = NamedHead.isReference(lines[1]) ? lines[1] : nil
        let order = lines[2].split(separator: " ").compactMap { Int64($0) }
        let declined = order.count == 2 ? ManifestOrder(version: order[0], revision: order[1]) : nil
        return NamedHeadRecord(manifestURL: lines[0], reference: reference, declined: declined)
    }

    private func write(_ r: NamedHeadRecord) {
        guard !r.manifestURL.hasLineBreak else { return }
        let order = r.declined.map { "\($0.version) \($0.revision)" } ?? ""
        try? FS.writeAtomically(namedHeadPath, Array("\(r.manifestURL)\n\(r.reference ?? "")\n\(order)\n".utf8))
    }

    /// The head reference kept for `manifestURL`; nil when none is, or it was kept for another URL.
    package func namedHead(for manifestURL: String) -> String? { namedHeadRecord(for: manifestURL)?.reference }

    /// The order of `manifestURL`'s manifest whose head was declined.
    func declinedHead(for manifestURL: String) -> ManifestOrder? { namedHeadRecord(for: manifestURL)?.declined }

    /// The manifest URL a head was kept for, and the head's reference (`status`).
    package func keptNamedHead() -> (manifestURL: String, reference: String)? {
        guard let r = namedHeadRecord(), let reference = r.reference else { return nil }
        return (r.manifestURL, reference)
    }

    /// Keeps `reference` as the head `manifestURL` names. Failing to write it costs only bytes.
    func keepNamedHead(_ reference: String, for manifestURL: String) {
        guard namedHead(for: manifestURL) != reference else { return }
        write(NamedHeadRecord(manifestURL: manifestURL, reference: reference, declined: nil))
    }

    /// Reads `manifestURL` itself while its manifest is of `order`: the head it names failed.
    func declineNamedHead(for manifestURL: String, order: ManifestOrder) {
        write(NamedHeadRecord(manifestURL: manifestURL, reference: nil, declined: order))
    }

    func forgetNamedHead() {
        try? FS.unlink(namedHeadPath)
    }
}
