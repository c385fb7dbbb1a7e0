/// A differential update can't go on, but the whole archive may still work: a server that
/// ignores or answers ranges wrongly, locations that disagree with the archive, a local file
/// that changed under the update. The update falls back to the whole archive in the same call,
/// whose own checks then tell a lying server from a wrong manifest.
struct DifferentialFallback: Error {
    let message: String
    /// Bytes arrived that the signed index does not describe (a hash, a size, a header): not a
    /// server's handling of ranges. A group fetch, which has no whole archive to fall back to,
    /// reports these as `ERR_INTEGRITY`, the others as `ERR_HTTP`.
    var badBytes = false
}
