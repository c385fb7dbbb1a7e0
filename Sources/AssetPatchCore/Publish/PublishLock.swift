import Glibc

/// The lock object a push takes on a store that ignores conditional writes (`rclone serve s3`,
/// older S3-compatible servers), where two publishers could otherwise both pass the read that
/// guards each head. `PREFIX/.assetpatch-lock` holds a random token, who took it, and when it
/// expires (15 minutes: a killed push's lock lapses; on the host it was taken on, a push run
/// again takes it at once once its holder is gone).
///
/// Taking it: a lock there and not expired is refused. Otherwise the token is written, and read
/// back after a settling second: of publishers who all saw no lock and wrote theirs, only the
/// last writer reads its own token back (the store reads its newest write, as S3 has since
/// 2020). Two can both pass only if one stalls over a second between its read and its write.
/// The token is read again before each head is written, and the lock deleted at the end.
package final class PublishLock {
    package static let key = ".assetpatch-lock"
    static let lifetime: Int64 = 900
    static let settleSeconds: UInt32 = 1

    let store: ObjectStore
    let token: String
    /// When the lock was last written: renewed while a long push goes on.
    private var taken: Int64

    init(store: ObjectStore, token: String, taken: Int64) {
        self.store = store
        self.token = token
        self.taken = taken
    }

    package static func acquire(_ store: ObjectStore, breaking: Bool, now: () -> Int64 = unixTime) throws -> PublishLock {
        if !breaking, let held = try read(store), held.expires > now(), !held.deadHere {
            throw AssetPatchError(.state, "\(store.location.shown)\(key): another push holds the lock (\(held.holder), until \(RFC3339.format(held.expires))); if it was killed, wait for that or push with --break-lock")
        }
        var rng = SystemRandomNumberGenerator()
        let token = Hex.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let taken = now()
        try write(store, token: token, taken: taken)
        sleep(settleSeconds)
        let lock = PublishLock(store: store, token: token, taken: taken)
        try lock.check()
        return lock
    }

    static func write(_ store: ObjectStore, token: String, taken: Int64) throws {
        let body = Array(JSON.object([("token", .string(token)), ("holder", .string("\(hostName()) pid \(getpid())")),
                                      ("host", .string(hostIdentity())), ("pid", .int(Int64(getpid()))), ("taken", .string(RFC3339.format(taken))),
                                      ("expires", .string(RFC3339.format(taken + lifetime)))]).serialized(indent: 0).utf8)
        try store.put(key, bytes: body, sha256: Digest.sha256Hex(body), md5: Hex.encode(try Digest.md5(body)),
                      contentType: "application/json", cacheControl: "no-store")
    }

    /// Keeps the lock from lapsing under a push that runs long: written again, still this
    /// push's, once a third of its lifetime has passed.
    package func renew(now: Int64 = unixTime()) throws {
        guard now - taken >= PublishLock.lifetime / 3 else { return }
        try check()
        try PublishLock.write(store, token: token, taken: now)
        taken = now
    }

    /// Throws unless the lock is still this push's.
    package func check() throws {
        let held = try PublishLock.read(store)
        guard let held, held.token == token else {
            let who = held.map { " (\($0.holder))" } ?? ""
            throw AssetPatchError(.state, "\(store.location.shown)\(PublishLock.key): another push took the lock\(who); nothing of this push's heads was written")
        }
    }

    /// Deletes the lock if it is still this push's.
    package func release() {
        if (try? check()) != nil { try? store.delete(PublishLock.key) }
    }

    struct Held {
        var token: String
        var holder: String
        var expires: Int64
        /// Taken by a process of this host that is gone (a push killed here): run again here,
        /// a push need not wait for its lock to lapse.
        var deadHere = false
    }

    static func read(_ store: ObjectStore) throws -> Held? {
        guard let (body, _) = try store.get(key, limit: 64 << 10) else { return nil }
        guard let json = try? JSONParser.parse(body), let token = json["token"]?.string,
              let expires = json["expires"]?.string.flatMap(RFC3339.parse) else {
            // Not one this tool wrote: treated as held for its whole lifetime from now.
            return Held(token: "", holder: "an unreadable lock object", expires: unixTime() + lifetime)
        }
        var held = Held(token: token, holder: json["holder"]?.string ?? "?", expires: expires)
        if json["host"]?.string == hostIdentity(), let pid = json["pid"]?.int64, pid > 0, pid < Int64(Int32.max) {
            held.deadHere = kill(pid_t(pid), 0) != 0 && errno == ESRCH
        }
        return held
    }

    /// The host name, this boot and this process's pid namespace: containers sharing a host
    /// name see none of each other's processes, so a pid is judged only where it means the same.
    static func hostIdentity() -> String {
        let boot = (try? FS.readFile("/proc/sys/kernel/random/boot_id", limit: 64)).map { String(decoding: $0, as: UTF8.self).stripping(" \n") } ?? ""
        var link = [CChar](repeating: 0, count: 256)
        let n = readlink("/proc/self/ns/pid", &link, link.count - 1)
        let ns = n > 0 ? String(decoding: link[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        return "\(hostName()) \(boot) \(ns)"
    }

    static func hostName() -> String {
        var host = [CChar](repeating: 0, count: 256)
        _ = gethostname(&host, host.count - 1)
        return String(cString: host)
    }
}
