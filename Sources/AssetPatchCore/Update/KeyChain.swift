import Glibc

/// Which keys must sign a manifest: the host's pinned keys or key document, or the newest key
/// document the repository's chain leads to from them.
extension ManifestJudge {
    /// The signing keys a manifest is judged by, following the chain of key documents up to the
    /// version the manifest names (`ref`); nil when the host verifies nothing.
    ///
    /// Each document `v` is fetched from `<ref.url>v.json` (relative to the manifest) and must
    /// say version `v` and carry signatures of a threshold of the previous document's root keys
    /// and of its own. The newest document followed is kept in the data directory once the
    /// manifest is accepted (`Store.commit`), so a manifest naming an older document (or none) is
    /// still judged by the newest, and a signing key rotated out is refused by every client that
    /// has seen the document without it. The newest document must not have expired
    /// (`ERR_EXPIRED`); those before it may have. Also returns what was followed.
    func signingKeys(for ref: KeyDocumentRef?, manifestURL: String) throws -> (KeySet?, KeyChainFollowed?) {
        guard let anchor = config.trustAnchor else { return (nil, nil) }
        var current = anchor
        let kept = store.keptKeyDocument(anchor: anchor)
        if let kept, kept.version > current.version { current = kept }
        // Before 0.5 no signers were recorded: they were a threshold of the anchor's keys when
        // this data directory had followed no document, and are unknown otherwise.
        var chain = KeyChainFollowed(anchor: anchor, document: current, followed: nil,
                                 legacy: current.version == anchor.version ? .keys(anchor.signing) : .unknown)
        if let ref, ref.version > current.version {
            let steps = ref.version - current.version
            guard steps <= 1000 else {
                throw AssetPatchError(.signature, "the manifest names key document \(ref.version), \(steps) after version \(current.version) this client trusts (at most 1000 are followed)")
            }
            let base = URLs.resolve(ref.url, against: manifestURL)
            // A forged manifest must not send the client to any host it names before its
            // signature can be checked: key documents come from the manifest's origin.
            if !config.allowCrossOriginKeys, URLs.origin(base) != URLs.origin(manifestURL) {
                throw AssetPatchError(.signature, "the manifest names key documents at \(URLs.redacted(base)), not on its own origin \(URLs.origin(manifestURL).map(URLs.redacted) ?? "?") (option allow_cross_origin_keys allows it)")
            }
            for v in (current.version + 1)...ref.version {
                try cancel.check()
                let url = base + "\(v).json"
                let bytes = try fetchKeyDocument(url)
                let shown = URLs.redacted(url)
                let next = try KeyDocument.decode(bytes, source: shown)
                guard next.version == v else {
                    throw AssetPatchError(.signature, "\(shown): says version \(next.version), expected \(v) (a document replayed in another's place)")
                }
                try next.verify(after: current, source: shown)
                log(.info, "\(shown): key document \(v) accepted: manifests need \(next.signing.described); the next document needs \(next.root.described)")
                current = next
            }
            chain.document = current
            chain.followed = current
        }
        if let expires = current.expires, expires <= unixTime() {
            throw AssetPatchError(.expired, "key document \(current.version) expired at \(RFC3339.format(expires)); the publisher must publish a newer one")
        }
        return (current.signing, chain)
    }

    private func fetchKeyDocument(_ url: String) throws -> [UInt8] {
        guard let location = Location(url) else {
            throw AssetPatchError(.manifest, "key document URL \"\(URLs.redacted(url))\" has an unsupported scheme")
        }
        switch location {
        case let .file(path, _):
            // A remote manifest may not make the client read local files.
            guard config.manifest?.isFile ?? false else {
                throw AssetPatchError(.manifest, "a remote manifest may not name file:// key documents")
            }
            return try FS.readFile(path, limit: KeyDocument.maxBytes, limitStatus: .signature)
        case .http:
            // Not redirected either: a forged manifest must not send the client to another host.
            var settings = http.settings
            settings.followRedirects = false
            let direct = HTTPClient(settings: settings, cancel: cancel)
            return try context.retrying(location) { try direct.fetch(url, limit: KeyDocument.maxBytes, limitStatus: .signature).body }
        }
    }
}

/// The chain of key documents an evaluation followed: the anchor, the document in force, the
/// document newly followed (kept once the manifest is accepted), and what to assume of what was
/// accepted before signers were recorded.
struct KeyChainFollowed {
    var anchor: KeyDocument
    var document: KeyDocument
    var followed: KeyDocument?
    var legacy: LegacyTrust
}
