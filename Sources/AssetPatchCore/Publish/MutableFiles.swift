import Glibc

/// A release repository's mutable files (`manifest.json`; channel manifests and key documents
/// later), written so that caches never keep an old version.
///
/// Static servers make validators from a file's modification time in whole seconds (nginx's
/// ETag is `"<mtime hex>-<size hex>"`, and every Last-Modified has one-second resolution). Two
/// versions of a file published within one second, with the same size, get the same validators,
/// and a cache that revalidates its copy (nginx's proxy_cache_revalidate, Varnish) is told 304
/// and serves the old version to every client until the file changes again; a client's own
/// rule against racy validators can't help behind such a cache. So each new version of a
/// mutable file gets a modification time at least one whole second after the previous
/// version's: now, or the previous time plus one when that is later (when versions follow each
/// other faster than once a second, the time runs ahead of the clock for a while, which
/// clients treat as racy and so fetch in full until the clock catches up).
///
/// An upload must keep the time (`rsync -t`, `scp -p`, `gsutil rsync`) or, for servers whose
/// validators come from the content (S3's and most object stores' ETag is an MD5), needs none.
package enum MutableFile {
    /// The modification time, in whole seconds, the next version of `path` gets.
    package static func nextModificationTime(_ path: String, now: Int64 = unixTime()) -> Int64 {
        var st = stat()
        guard lstat(path, &st) == 0 else { return now }
        return max(now, Int64(st.st_mtim.tv_sec) + 1)
    }

    /// Replaces `path` atomically and durably (`FS.writeAtomically`) with a modification time
    /// a whole second after its previous version's. Returns the time given.
    @discardableResult
    package static func write(_ path: String, _ bytes: [UInt8]) throws -> Int64 {
        let modified = nextModificationTime(path)
        try FS.writeAtomically(path, bytes, modified: modified)
        return modified
    }
}
