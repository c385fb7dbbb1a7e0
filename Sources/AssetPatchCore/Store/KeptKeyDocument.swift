extension Store {
    /// The newest key document followed from each trust anchor, one file per anchor: clients
    /// of one data directory that pin different anchors (two builds of an app) each keep what
    /// they followed, so neither makes the other forget a key it saw retired.
    var keyDocumentsDir: String { root + "/key-documents" }
    func keptKeyDocumentPath(anchor: KeyDocument) -> String { keyDocumentsDir + "/" + anchor.identity + ".json" }
    /// Where 0.4 kept the one document it followed (with the anchor's identity inside).
    var legacyKeptKeyDocumentPath: String { root + "/key-document.json" }

    /// The newest key document this client followed a chain to from `anchor` (the document or
    /// keys the host pins now).
    func keptKeyDocument(anchor: KeyDocument) -> KeyDocument? {
        read(keptKeyDocumentPath(anchor: anchor), anchor: anchor) ?? read(legacyKeptKeyDocumentPath, anchor: anchor)
    }

    /// Every key document kept, one per trust anchor a client of this data directory followed
    /// documents from (for `assetpatch status`).
    package func followedKeyDocuments() -> [KeyDocument] {
        var paths = ((try? FS.list(keyDocumentsDir)) ?? []).sorted().filter { $0.hasSuffix(".json") }.map { keyDocumentsDir + "/" + $0 }
        if FS.exists(legacyKeptKeyDocumentPath) { paths.append(legacyKeptKeyDocumentPath) }
        return paths.compactMap { path in
            guard let bytes = try? FS.readFile(path, limit: KeyDocument.maxBytes + 4096, followLinks: false),
                  let envelope = (try? JSONParser.parse(bytes))?["document"] else { return nil }
            return try? KeyDocument.decode(Array(envelope.serialized(indent: 0).utf8), source: path)
        }
    }

    private func read(_ path: String, anchor: KeyDocument) -> KeyDocument? {
        guard let bytes = try? FS.readFile(path, limit: KeyDocument.maxBytes + 4096, followLinks: false),
              let json = try? JSONParser.parse(bytes), json["anchor"]?.string == anchor.identity,
              let envelope = json["document"], let doc = try? KeyDocument.decode(Array(envelope.serialized(indent: 0).utf8), source: path)
        else { return nil }
        return doc
    }

    /// Keeps `doc` as the newest followed from `anchor`, durably, unless a newer one is kept
    /// already (another process followed further). A client that lost it would follow the
    /// chain again only as far as the manifest it reads names, and a manifest signed by a key
    /// retired since, naming an older document, would pass. Called under the state lock.
    func keepKeyDocumentIfNewer(_ doc: KeyDocument, anchor: KeyDocument) throws {
        if let kept = keptKeyDocument(anchor: anchor), kept.version >= doc.version { return }
        let json = JSON.object([("anchor", .string(anchor.identity)), ("document", doc.envelope())])
        try FS.makeDirectories(keyDocumentsDir)
        try FS.writeAtomically(keptKeyDocumentPath(anchor: anchor), Array((json.serialized(indent: 2) + "\n").utf8))
        try FS.syncDirectory(keyDocumentsDir)
    }
}
