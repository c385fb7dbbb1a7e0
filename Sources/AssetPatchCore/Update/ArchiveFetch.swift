import Glibc

/// The whole archive: its download (resumable), what it would transfer, the fetch with its
/// checks.
extension Updater {
    // MARK: Plan

    /// The download of `c`'s archive, made once per update: the route's choice, the index's
    /// read, the free-space check and the install's retries share it (and its running digest).
    /// A format-1 manifest bounds it by the archive's declared size (more bytes:
    /// `ERR_INTEGRITY`); a legacy manifest declares none, so `max_legacy_archive_bytes` bounds
    /// it (`ERR_ARCHIVE`).
    func download(for c: Candidate) throws -> ArchiveDownload {
        if let d = archiveDownload, d.digest == c.manifest.archiveDigest, d.source == c.archive { return d }
        let shown = c.archive.shown
        let limit: UInt64
        let limitError: (UInt64) -> AssetPatchError
        if let size = c.manifest.archiveSize {
            limit = size
            limitError = { AssetPatchError(.integrity, "\(shown): archive is longer than the \(size) bytes the manifest says (\($0) bytes or more)") }
        } else {
            let cap = config.maxLegacyArchiveBytes
            limit = cap
            limitError = { AssetPatchError(.archive, "\(shown): archive of \($0) bytes or more exceeds max_legacy_archive_bytes (\(cap))") }
        }
        let d = try ArchiveDownload(store: store, source: c.archive, digest: c.manifest.archiveDigest, algorithm: c.manifest.digestAlgorithm,
                                    expectedSize: c.manifest.archiveSize, limit: limit, limitError: limitError, context: context)
        archiveDownload = d
        return d
    }

    /// Bytes the download would still transfer. A legacy archive's size is learned from the
    /// file (file://) or a HEAD request; 0 when the server does not tell.
    func transferEstimate(_ d: ArchiveDownload) throws -> UInt64 {
        var total = d.expectedSize
        if total == nil {
            switch d.source {
            case let .file(path, _): total = FS.fileSize(path)
            case let .http(url):
                let head = try context.retrying(d.source) { try http.head(url) }
                total = head.status == 200 ? head.contentLength : nil
                if total == nil { log(.warning, "HEAD \(d.source.shown): HTTP \(head.status) without a length; the download size is unknown") }
            }
        }
        guard let total else { return 0 }
        let have = d.resumableBytes()
        return have <= total ? total - have : total
    }

    // MARK: Fetch

    /// Downloads the archive, resuming what is on disk and retrying transient failures; returns
    /// the path of the archive, verified against the manifest's size and digest.
    func fetch(_ c: Candidate, _ d: ArchiveDownload) throws -> String {
        let total = c.manifest.archiveSize ?? 0
        let resumedFrom = d.resumableBytes()
        progress.report(Progress(phase: .download, bytesDone: resumedFrom, bytesTotal: total))
        let digestHex = try context.retrying(d.source) { try d.attempt() }
        let size = FS.fileSize(d.partPath) ?? 0
        progress.report(Progress(phase: .download, bytesDone: size, bytesTotal: total == 0 ? size : total), final: true)
        let shown = c.archive.shown
        if let expected = c.manifest.archiveSize, size != expected {
            store.discardPartial(c.manifest.archiveDigest)
            throw AssetPatchError(.integrity, "\(shown): archive is \(size) bytes, the manifest says \(expected)")
        }
        if d.hashing { try judgeDigest(c, digestHex, resumedFrom: resumedFrom) }
        return d.partPath
    }

    /// Hashes a complete archive downloaded without hashing (`ArchiveDownload.hashing`) and
    /// judges it as the download would have: the update reads a file from it only then.
    func verifyArchive(_ c: Candidate, path: String, resumedFrom: UInt64) throws {
        let algorithm: Digest.Algorithm = c.manifest.kind == .legacy ? .md5 : .sha256
        try judgeDigest(c, try Digest.hexOfFile(path, algorithm), resumedFrom: resumedFrom)
    }

    /// A digest other than the manifest's drops the partial download (`ERR_INTEGRITY`); when
    /// the download had resumed bytes kept from before, the update starts over once.
    private func judgeDigest(_ c: Candidate, _ digestHex: String, resumedFrom: UInt64) throws {
        guard digestHex != c.manifest.archiveDigest else { return }
        store.discardPartial(c.manifest.archiveDigest)
        resumedDamagedPartial = resumedFrom > 0
        let algo = c.manifest.kind == .legacy ? "md5" : "sha256"
        let resumed = resumedFrom > 0 ? " (the bytes resumed at \(resumedFrom) do not complete the archive's digest: restarting the download from byte 0)" : ""
        throw AssetPatchError(.integrity, "\(c.archive.shown): archive \(algo) is \(digestHex), the manifest says \(c.manifest.archiveDigest)\(resumed)")
    }
}
