import ArgumentParser
import AssetPatchCore
import Glibc

/// The options of every command that signs a channel's manifests: the keys, and when what it
/// signs expires.
struct SigningOptions: ParsableArguments {
    @Option(name: .long, help: "Private key file: sign the manifests (DSSE envelope); repeatable for a threshold of several keys.")
    var key: [String] = []
    @Flag(name: .customLong("allow-readable-key"),
          help: "Use a private key file other users can read (refused otherwise, as ssh refuses such keys).")
    var allowReadableKey = false
    @Option(name: .long, help: "When clients stop accepting the manifests signed now: a duration (90d, 12h, 1w), an RFC 3339 time, or never. Default: publish 90d; other commands the channel's lifetime so far.")
    var expires: String?

    func seeds() throws -> [[UInt8]] { try key.map { try readPrivateKey($0, allowReadable: allowReadableKey) } }

    func expiry(default fallback: Expiry) throws -> Expiry {
        guard let expires else { return fallback }
        guard let e = Expiry(expires) else {
            throw AssetPatchError(.argument, "--expires \(expires): a duration (90d, 12h, 30m, 1w), an RFC 3339 time, or never")
        }
        return e
    }
}

/// Reads a private key file, refusing one that users other than its owner can read or write
/// (as ssh refuses them): a signing key others can copy signs for them too.
func readPrivateKey(_ path: String, allowReadable: Bool) throws -> [UInt8] {
    var st = stat()
    guard stat(path, &st) == 0 else { throw AssetPatchError(.argument, "\(path): \(String(cString: strerror(errno)))") }
    let mode = st.st_mode & 0o777
    if mode & 0o077 != 0 && !allowReadable {
        throw AssetPatchError(.argument, "\(path): this private key is readable by other users (mode \(String(mode, radix: 8))): chmod 600 it, or pass --allow-readable-key")
    }
    return try readKeyFile(path)
}
