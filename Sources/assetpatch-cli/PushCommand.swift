import ArgumentParser
import AssetPatchCore
import Glibc

/// `assetpatch push`: a local repository to an S3-compatible bucket, in an order clients can
/// live with.
struct Push: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload a repository to an S3-compatible bucket: immutable objects first (skipped when already there), each checked; the heads last, written only if the bucket still holds what this repository last pushed (docs/hosting.md).")

    @Argument(help: "The local release repository.") var repo: String
    @Argument(help: "s3://BUCKET/PREFIX") var destination: String
    @OptionGroup var s3: S3Options
    @OptionGroup var upload: UploadOptions
    @Flag(name: .long, help: "Write the heads whatever the bucket holds (another publisher's releases there are then no longer offered).")
    var force = false
    @Flag(name: .customLong("dry-run"), help: "Say what would be uploaded; upload nothing.") var dryRun = false
    @Flag(name: .long, help: "Print what was uploaded as JSON.") var json = false

    func run() throws {
        try cli {
            let store = try s3.store(destination)
            let location = store.location
            let out = try RepositoryPush.push(repo: FS.absolute(repo), to: store, force: force, dryRun: dryRun, acl: upload.acl,
                                              partSize: upload.partSize, breakLock: upload.breakLock) { path in
                if !json { print("uploaded \(path)") }
            }
            if json {
                print(JSON.object([("uploaded", .array(out.uploaded.map { .string($0) })), ("heads", .array(out.heads.map { .string($0) })),
                                   ("skipped", .int(Int64(out.skipped))), ("bytes", .int(Int64(out.bytes))),
                                   ("left_out", .array(out.leftOut.map { .string($0) })),
                                   ("conditional_writes", .bool(out.conditionalWrites)), ("multipart", .int(Int64(out.multipart))),
                                   ("parts", .int(Int64(out.parts))), ("parts_resumed", .int(Int64(out.partsResumed))),
                                   ("left_alone", .array(out.leftAlone.map { .string($0) }))]).serialized(indent: 2))
                return
            }
            if !out.leftOut.isEmpty {
                printError("note: not part of a repository, not uploaded: \(out.leftOut.prefix(10).joined(separator: ", "))\(out.leftOut.count > 10 ? ", and \(out.leftOut.count - 10) more" : "")")
            }
            if !out.leftAlone.isEmpty {
                printError("note: changed in the bucket by another publisher since this repository last pushed them, and not here: \(out.leftAlone.joined(separator: ", ")) (left as they are there)")
            }
            if !out.conditionalWrites {
                printError("note: \(location.shown) ignores conditional writes: a lock object (\(PublishLock.key)) kept other pushes out instead, and each head was compared by a read just before its write")
            }
            print("\(dryRun ? "would push" : "pushed") to \(location.shown): \(out.uploaded.count) objects (\(out.bytes) bytes), \(out.heads.count) heads; \(out.skipped) already there")
        }
    }
}

/// `assetpatch pull`: a bucket's repository into a local working copy (heads, history, key
/// documents; no archives), to stage key documents in or to keep.
struct Pull: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring a bucket's heads, history and key documents (not its archives) into a local working copy, never back: a copy with newer heads keeps them; two publishers' versions are refused.")

    @Argument(help: "s3://BUCKET/PREFIX") var source: String
    @Argument(help: "The local working copy (created if missing).") var repo: String
    @OptionGroup var s3: S3Options
    @Option(name: .customLong("trust-key"), help: "A public key (base64 or .pub file) one of which must have signed every head and release taken from the bucket; repeatable. Without: taken unchecked, and said so.")
    var trustKey: [String] = []

    func run() throws {
        try cli {
            let store = try s3.store(source)
            let keys = try trustKey.map(readPublicKey)
            let out = try RepositoryPull.pull(from: store, into: FS.absolute(repo), trusted: keys.isEmpty ? nil : keys)
            if keys.isEmpty && !out.downloaded.isEmpty {
                printError("note: taken without checking who signed them (give --trust-key): a command that signs this copy signs what the bucket held")
            }
            for k in out.downloaded { print("downloaded \(k)") }
            if !out.ahead.isEmpty { print("newer here, kept: \(out.ahead.joined(separator: ", "))") }
            print("pulled \(store.location.shown) into \(repo): \(out.downloaded.count) files (\(out.bytes) bytes)")
        }
    }
}

/// Where a bucket is and how to address it: the options of every command that reads or
/// writes one.
struct S3Options: ParsableArguments {
    @Option(name: .long, help: "The service's URL for S3-compatible stores (MinIO, R2, GCS, Ceph...); default AWS's for the region. Default also: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL.")
    var endpoint: String?
    @Option(name: .long, help: "The region signed for (default $AWS_REGION, else us-east-1).") var region: String?
    @Flag(name: .customLong("virtual-hosted"), help: "Address the bucket as BUCKET.HOST (AWS's default; with --endpoint the default is path-style).")
    var virtualHosted = false

    func store(_ url: String) throws -> ObjectStore {
        func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        let location = try ObjectStore.Location.parse(url, endpoint: endpoint ?? env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL"),
                                                      region: region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION"),
                                                      pathStyle: virtualHosted ? false : nil)
        return try ObjectStore.fromEnvironment(location)
    }
}

/// `assetpatch gc`: archives nothing names, older than a grace period.
struct GC: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Delete archives that no channel's head and no release of the history names, once older than a grace period (what failed or losing publishes left), in a repository directory or a bucket; in a bucket, abort uploads in parts left unfinished as long.")

    @Argument(help: "The repository: a directory, or s3://BUCKET/PREFIX.") var repo: String
    @Option(name: .long, help: "Keep unnamed archives younger than this (a client mid-update may still fetch one): 30m, 12h, 7d (default 7d).")
    var grace: String = "7d"
    @OptionGroup var s3: S3Options
    @Flag(name: .customLong("dry-run"), help: "Say what would be deleted; delete nothing.") var dryRun = false
    @Flag(name: .long, help: "Print what was deleted as JSON.") var json = false

    func run() throws {
        try cli {
            guard let seconds = parseDuration(grace) else { throw AssetPatchError(.argument, "--grace \(grace): a duration such as 30m, 12h, 7d") }
            let place: RepositoryGC.Place = repo.hasPrefix("s3://") ? .bucket(try s3.store(repo)) : .directory(FS.absolute(repo))
            let out = try RepositoryGC.collect(place, grace: seconds, dryRun: dryRun)
            if json {
                print(JSON.object([("deleted", .array(out.deleted.map { .string($0) })), ("bytes", .int(Int64(out.bytes))),
                                   ("young", .array(out.young.map { .string($0) })), ("kept", .int(Int64(out.kept))),
                                   ("aborted_uploads", .array(out.aborted.map { .string($0) })),
                                   ("dry_run", .bool(dryRun))]).serialized(indent: 2))
                return
            }
            for k in out.deleted { print("\(dryRun ? "would delete" : "deleted") \(k)") }
            for k in out.aborted { print("\(dryRun ? "would abort" : "aborted") an unfinished upload of \(k)") }
            if let why = out.uploadsUnlisted { printError("note: unfinished uploads were not looked for: \(why)") }
            print("\(dryRun ? "would delete" : "deleted") \(out.deleted.count) archives (\(out.bytes) bytes); kept \(out.kept) named, \(out.young.count) unnamed but younger than \(grace)")
        }
    }
}
