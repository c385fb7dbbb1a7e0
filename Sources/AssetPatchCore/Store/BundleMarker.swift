import Glibc

/// What an app's bundle says about itself, so that an app-store upgrade that ships newer
/// resources is not shadowed by a hot update built for the old app.
///
/// `BUNDLE_DIR/assetpatch-bundle.json` = `{"package": "game", "version": 7}` (written by
/// `assetpatch stamp-bundle`) declares that the bundle carries release 7 of the package: an
/// installed release up to version 7 is not served any more and updates install only newer
/// ones. Without the file the bundle carries no release (version 0).
package enum BundleMarker {
    package static let fileName = "assetpatch-bundle.json"

    /// nil: no marker; otherwise the marker or what is wrong with it (a broken marker must not
    /// stop the app: it is ignored, and the failure says why).
    static func load(_ bundleDir: String) -> Result<(package: String, version: Int64), AssetPatchError>? {
        let path = bundleDir + "/" + fileName
        guard FS.exists(path) else { return nil }
        guard let bytes = try? FS.readFile(path, limit: 65536), let json = try? JSONParser.parse(bytes),
              let package = json["package"]?.string, !package.isEmpty, let version = json["version"]?.int64, version >= 1 else {
            return .failure(AssetPatchError(.io, "\(path): not a bundle marker ({\"package\": NAME, \"version\": N >= 1}); ignored"))
        }
        return .success((package, version))
    }

    package static func write(_ bundleDir: String, package: String, version: Int64) throws {
        let json = JSON.object([("package", .string(package)), ("version", .int(version))])
        try FS.writeAtomically(bundleDir + "/" + fileName, Array((json.serialized(indent: 2) + "\n").utf8))
    }

    /// A cheap fingerprint of the bundle: the name, size, modification time and inode of each
    /// top-level entry (the marker among them). An app upgrade replaces the bundle's files or
    /// directories, which changes it; reading it costs one directory listing.
    static func fingerprint(_ bundleDir: String) -> String {
        var parts: [String] = []
        for name in ((try? FS.list(bundleDir)) ?? []).sorted() {
            var st = stat()
            guard lstat(bundleDir + "/" + name, &st) == 0 else { continue }
            parts.append("\(name)\t\(st.st_size)\t\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)\t\(st.st_ino)")
        }
        guard let d = try? Digest(.sha256) else { return "" }
        for p in parts { Array((p + "\n").utf8).withUnsafeBytes { d.update($0) } }
        return String(d.finalHex().prefix(32))
    }
}
