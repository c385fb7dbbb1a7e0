/// The mirrors the publisher lists in its signed head (`mirrors` in a head), kept from the
/// newest verified head this client accepted, so the next check can reach them when
/// `manifest_url` fails: a publisher adds a host without an app update. Only heads whose
/// signature was verified are kept from; a client that verifies nothing uses the host's list
/// alone (`Updater` reads it only then).
extension Store {
    var keptMirrorsPath: String { root + "/mirrors" }

    /// The kept list, one http(s) URL a line; empty when there is none.
    package func keptMirrors() -> [String] {
        guard let bytes = try? FS.readFile(keptMirrorsPath, limit: 64 << 10, followLinks: false) else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
            .filter { [.http, .https].contains(URLs.scheme($0)) }.prefix(16).map { $0 }
    }

    /// Keeps `urls` (a verified head's list) in place of the list kept before; an empty list
    /// removes it. Failing to write it costs only the fallback.
    func keepMirrors(_ urls: [String]) {
        guard urls != keptMirrors() else { return }
        if urls.isEmpty {
            try? FS.unlink(keptMirrorsPath)
        } else {
            try? FS.writeAtomically(keptMirrorsPath, Array(urls.map { $0 + "\n" }.joined().utf8))
        }
    }
}
