/// The head a `manifest.json` names (`"head": "head.json"`, format.md "The head"), kept so that
/// a client whose host still sets `manifest_url` to a repository's `manifest.json` reads the
/// small head and its paged index from then on, not a manifest that lists every file.
///
/// `DATA_DIR/named-head`: two lines, the manifest URL it was learnt from and the head's
/// reference as the manifest wrote it (resolved against each source's URL, so mirrors follow
/// too). Kept only from a manifest the check judged (signature when the client verifies,
/// package, channel, expiry) and only when the head it names was not older than that manifest;
/// dropped when the head fails for anything but a transient reason. It only says where to
/// read: the head itself is judged like any manifest.
extension Store {
    var namedHeadPath: String { root + "/named-head" }

    /// The head reference kept for `manifestURL`; nil when none is, or it was kept for another URL.
    package func namedHead(for manifestURL: String) -> String? {
        guard let kept = keptNamedHead(), kept.manifestURL == manifestURL else { return nil }
        return kept.reference
    }

    /// The manifest URL a head was kept for, and the head's reference (`status`).
    package func keptNamedHead() -> (manifestURL: String, reference: String)? {
        guard let bytes = try? FS.readFile(namedHeadPath, limit: 8 << 10, followLinks: false) else { return nil }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 2, NamedHead.isReference(String(lines[1])) else { return nil }
        return (String(lines[0]), String(lines[1]))
    }

    /// Keeps `reference` as the head `manifestURL` names. Failing to write it costs only bytes.
    func keepNamedHead(_ reference: String, for manifestURL: String) {
        guard namedHead(for: manifestURL) != reference, !manifestURL.hasLineBreak else { return }
        try? FS.writeAtomically(namedHeadPath, Array("\(manifestURL)\n\(reference)\n".utf8))
    }

    func forgetNamedHead() {
        try? FS.unlink(namedHeadPath)
    }
}
