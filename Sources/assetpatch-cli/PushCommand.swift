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
    @Option(name: .long, help: "The service's URL for S3-compatible stores (MinIO, R2, GCS, Ceph...); default AWS's for the region. Default also: $AWS_ENDPOINT_URL.")
    var endpoint: String?
    @Option(name: .long, help: "The region signed for (default $AWS_REGION, else us-east-1).") var region: String?
    @Flag(name: .customLong("virtual-hosted"), help: "Address the bucket as BUCKET.HOST (AWS's default; with --endpoint the default is path-style).")
    var virtualHosted = false
    @Option(name: .long, help: "A canned ACL for every object (public-read), for buckets that grant reads by ACL rather than by a bucket policy.")
    var acl: String?
    @Flag(name: .long, help: "Write the heads whatever the bucket holds (another publisher's releases there are then no longer offered).")
    var force = false
    @Flag(name: .customLong("dry-run"), help: "Say what would be uploaded; upload nothing.") var dryRun = false
    @Flag(name: .long, help: "Print what was uploaded as JSON.") var json = false

    func run() throws {
        try cli {
            func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
            let endpoint = self.endpoint ?? env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL")
            let location = try ObjectStore.Location.parse(destination, endpoint: endpoint, region: region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION"),
                                                          pathStyle: virtualHosted ? false : nil)
            let store = try ObjectStore.fromEnvironment(location)
            if let acl, !["private", "public-read", "bucket-owner-full-control"].contains(acl) {
                throw AssetPatchError(.argument, "--acl \(acl): private, public-read or bucket-owner-full-control")
            }
            let out = try RepositoryPush.push(repo: FS.absolute(repo), to: store, force: force, dryRun: dryRun, acl: acl) { path in
                if !json { print("uploaded \(path)") }
            }
            if json {
                print(JSON.object([("uploaded", .array(out.uploaded.map { .string($0) })), ("heads", .array(out.heads.map { .string($0) })),
                                   ("skipped", .int(Int64(out.skipped))), ("bytes", .int(Int64(out.bytes))),
                                   ("left_out", .array(out.leftOut.map { .string($0) })),
                                   ("conditional_writes", .bool(out.conditionalWrites))]).serialized(indent: 2))
                return
            }
            if !out.leftOut.isEmpty {
                printError("note: not part of a repository, not uploaded: \(out.leftOut.prefix(10).joined(separator: ", "))\(out.leftOut.count > 10 ? ", and \(out.leftOut.count - 10) more" : "")")
            }
            if !out.conditionalWrites {
                printError("note: \(location.shown) ignores conditional writes: the heads were compared by a read just before each write, which a publisher writing in between can still pass")
            }
            print("\(dryRun ? "would push" : "pushed") to \(location.shown): \(out.uploaded.count) objects (\(out.bytes) bytes), \(out.heads.count) heads; \(out.skipped) already there")
        }
    }
}
