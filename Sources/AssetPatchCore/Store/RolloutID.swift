import Glibc

extension Store {
    var rolloutIDPath: String { root + "/rollout-id" }

    /// This data directory's id in staged rollouts: 128 random bits as 32 hex digits, created at
    /// the first need and kept in `rollout-id` for the life of the data directory (a client
    /// that qualified for a rollout stays in it across restarts). Two processes creating it at
    /// once agree: the file is created exclusively and the loser reads the winner's.
    package func rolloutID() throws -> String {
        if let id = readRolloutID() { return id }
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let id = Hex.encode(bytes)
        let tmp = rolloutIDPath + ".\(getpid()).tmp"
        try FS.writeAtomically(tmp, Array((id + "\n").utf8), mode: 0o600)
        // link(2) fails when the name exists: the first writer's id stays.
        let linked = link(tmp, rolloutIDPath) == 0
        if linked { try? FS.syncDirectory(root) }
        if let kept = readRolloutID() {
            _ = unlink(tmp)
            return kept
        }
        // The name exists but holds no id (damaged outside the library): replaced, since every
        // check of a staged rollout would fail on it otherwise.
        do { try FS.rename(tmp, rolloutIDPath) } catch {
            _ = unlink(tmp)
            throw AssetPatchError(.io, "\(rolloutIDPath): could not be created or read")
        }
        try? FS.syncDirectory(root)
        guard let kept = readRolloutID() else {
            throw AssetPatchError(.io, "\(rolloutIDPath): could not be created or read")
        }
        return kept
    }

    /// The id if it was created (nothing is written).
    package func existingRolloutID() -> String? { readRolloutID() }

    private func readRolloutID() -> String? {
        guard let bytes = try? FS.readFile(rolloutIDPath, limit: 4096, followLinks: false) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: " \t\r\n")
        return Hex.isHex(text, length: 32) ? text : nil
    }
}
