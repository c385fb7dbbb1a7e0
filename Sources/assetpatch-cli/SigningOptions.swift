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

/// Reads a private key file, refusing one that users other than its owner can read or write,
/// or that another user owns (as ssh refuses them): a signing key others can copy signs for them
/// too. The checks are made on the file opened, not on its name.
func readPrivateKey(_ path: String, allowReadable: Bool) throws -> [UInt8] {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { throw AssetPatchError(.argument, "\(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { throw AssetPatchError(.argument, "\(path): not a regular file") }
    let mode = st.st_mode & 0o777
    if !allowReadable {
        if mode & 0o077 != 0 {
            throw AssetPatchError(.argument, "\(path): this private key is readable by other users (mode \(String(mode, radix: 8))): chmod 600 it, or pass --allow-readable-key")
        }
        if st.st_uid != geteuid() && st.st_uid != 0 {
            throw AssetPatchError(.argument, "\(path): this private key belongs to another user (uid \(st.st_uid)); pass --allow-readable-key to use it anyway")
        }
    }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let n = read(fd, &buffer, buffer.count)
    guard n > 0 else { throw AssetPatchError(.argument, "\(path): empty or unreadable") }
    let text = String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: " \t\r\n")
    guard let key = Base64.decode(text), key.count == Ed25519.keyLength else {
        throw AssetPatchError(.argument, "\(path): not a base64 Ed25519 key")
    }
    return key
}
