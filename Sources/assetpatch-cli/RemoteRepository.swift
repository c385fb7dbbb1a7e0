import ArgumentParser
import AssetPatchCore
import Glibc

/// How objects go up to a bucket: `push`'s options, and those of every command given
/// `--repo s3://...`.
struct UploadOptions: ParsableArguments {
    @Option(name: .long, help: "A canned ACL for every object uploaded (public-read), for buckets that grant reads by ACL rather than by a bucket policy.")
    var acl: String?
    @Option(name: .customLong("part-size"), help: "Files larger than this are uploaded in parts of this many bytes (at least 5 MiB; default 16 MiB), resumed after a kill.")
    var partSize: UInt64 = MultipartUpload.defaultPartSize
    @Flag(name: .customLong("break-lock"), help: "On a store without conditional writes: take the lock object even if another push holds it (one that was killed).")
    var breakLock = false

    func validate() throws {
        if let acl, !["private", "public-read", "bucket-owner-full-control"].contains(acl) {
            throw ValidationError("--acl \(acl): private, public-read or bucket-owner-full-control")
        }
        guard partSize >= MultipartUpload.minimumPartSize, partSize <= MultipartUpload.maximumPartSize else {
            throw ValidationError("--part-size \(partSize): 5 MiB to 5 GiB (\(MultipartUpload.minimumPartSize) to \(MultipartUpload.maximumPartSize) bytes), S3's bounds for a part")
        }
    }
}

/// A command that writes a repository, given `--repo s3://BUCKET/PREFIX`: the bucket's heads,
/// history and key documents pulled into a working copy (`--work-dir`, or a temporary
/// directory), the command run there, and the copy pushed back in push's order, its heads
/// written only over what was pulled.
struct RemoteRepositoryOptions: ParsableArguments {
    @OptionGroup var s3: S3Options
    @OptionGroup var upload: UploadOptions
    @Option(name: .customLong("work-dir"), help: "With --repo s3://...: the local working copy to pull into, write and push from (kept; default a temporary directory, removed).")
    var workDir: String?
    @Option(name: .customLong("trust-key"), help: "With --repo s3://...: a public key (base64 or .pub file) whose signatures on the bucket's heads and history are accepted besides the command's own --key (a key rotated out, another publisher's); repeatable.")
    var trustKey: [String] = []
    @Flag(name: .customLong("trust-bucket"), help: "With --repo s3://...: take the bucket's heads and history without checking who signed them (a repository nobody signed yet).")
    var trustBucket = false

    /// Runs `body` on the repository's directory: `repo` itself, or a working copy of the
    /// bucket it names, pushed back unless `dryRun`.
    /// `signing`: the command's keys, whose public halves a head or release taken from the
    /// bucket must be signed by (or by a --trust-key); nil for a command that signs no head.
    func within<T>(_ repo: String, signing: SigningOptions?, dryRun: Bool = false, _ body: (String) throws -> T) throws -> T {
        guard repo.hasPrefix("s3://") else {
            guard workDir == nil, trustKey.isEmpty, !trustBucket else {
                throw CLIFailure(status: .argument, message: "--work-dir, --trust-key and --trust-bucket go with --repo s3://...")
            }
            return try body(repo)
        }
        // A command that signs no head (keys publish) re-signs nothing the bucket holds.
        let trusted = try cli { () -> [[UInt8]]? in
            guard let signing, !trustBucket else { return nil }
            return try signing.seeds().map(Ed25519.publicKey(fromSeed:)) + trustKey.map(readPublicKey)
        }
        let store = try cli { try s3.store(repo) }
        var dir = workDir.map(FS.absolute) ?? ""
        if dir.isEmpty {
            var template = Array((FS.temporaryDirectory + "/assetpatch-repo-XXXXXX").utf8CString)
            guard let made = mkdtemp(&template) else { throw CLIFailure(status: .io, message: "mkdtemp: \(String(cString: strerror(errno)))") }
            dir = String(cString: made)
        }
        defer { if workDir == nil { try? FS.removeTree(dir) } }
        let pulled = try cli { try RepositoryPull.pull(from: store, into: dir, trusted: trusted, trustBucket: trustBucket) }
        if !pulled.unchecked.isEmpty {
            printError("note: history releases \(pulled.unchecked.map(String.init).joined(separator: ", ")) came from the bucket unchecked (no head signed by a key given names them): not signed again without --trust-bucket")
        }
        if !pulled.ahead.isEmpty { printError("note: \(dir) holds newer heads than \(store.location.shown): \(pulled.ahead.joined(separator: ", ")) (pushed now)") }
        let result = try body(dir)
        if !dryRun {
            let out = try cli { try RepositoryPush.push(repo: dir, to: store, acl: upload.acl, partSize: upload.partSize, breakLock: upload.breakLock) }
            if !out.conditionalWrites {
                printError("note: \(store.location.shown) ignores conditional writes: a lock object (\(PublishLock.key)) kept other pushes out instead")
            }
            printError("pushed to \(store.location.shown): \(out.uploaded.count) objects (\(out.bytes) bytes), \(out.heads.count) heads; \(out.skipped) already there")
        }
        return result
    }
}
