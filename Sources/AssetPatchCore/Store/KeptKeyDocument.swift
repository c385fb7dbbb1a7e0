extension Store {
    var keptKeyDocumentPath: String { root + "/key-document.json" }

    /// The newest key document this client followed a chain to, if it was followed from
    /// `anchor` (the document or keys the host pins now; a host that pins something else starts
    /// over from it).
    func keptKeyDocument(anchor: KeyDocument) -> KeyDocument? {
        guard let bytes = try? FS.readFile(keptKeyDocumentPath, limit: KeyDocument.maxBytes + 4096, followLinks: false),
              let json = try? JSONParser.parse(bytes), json["anchor"]?.string == anchor.identity,
              let envelope = json["document"], let doc = try? KeyDocument.decode(Array(envelope.serialized(indent: 0).utf8), source: keptKeyDocumentPath)
        else { return nil }
        return doc
    }

    /// Keeps `doc` as the newest followed from `anchor`. Losing it only costs following the
    /// chain again.
    func keepKeyDocument(_ doc: KeyDocument, anchor: KeyDocument) {
        let json = JSON.object([("anchor", .string(anchor.identity)), ("document", doc.envelope())])
        try? FS.writeAtomically(keptKeyDocumentPath, Array((json.serialized(indent: 2) + "\n").utf8))
    }
}
