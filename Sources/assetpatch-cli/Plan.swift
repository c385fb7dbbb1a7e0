import ArgumentParser
import AssetPatchCore
import Glibc

struct Plan: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "What a client on an earlier version would get from a channel, and how many bytes, from the repository alone (nothing is downloaded).")

    @Option(name: .long, help: "The release repository.") var repo: String
    @Option(name: .long, help: "The channel (default: stable).") var channel: String = Channel.defaultName
    @Option(name: .long, help: "The client's version (0: the bundle only).") var from: Int64 = 0
    @Option(name: .customLong("rollout-id"), help: "The client's rollout id (its data directory's rollout-id file, or the host's option): whether it is in the rollout.")
    var rolloutID: String?
    @Flag(name: .long, help: "Print JSON.") var json = false

    func run() throws {
        try cli {
            guard Channel.isValid(channel) else { throw AssetPatchError(.argument, "\(channel): not a channel name") }
            let p = try RepositoryPlan.make(repo: FS.absolute(repo), channel: channel, from: from, rolloutID: rolloutID)
            let v = p.release.version
            let takes = p.rollout?.takes ?? true
            if json {
                print(JSON.object([("channel", .string(channel)), ("from", .int(from)), ("version", .int(v)),
                                   ("takes", .bool(from < v && takes)),
                                   ("rollout", p.rollout.map { r in .object([("bucket", .int(Int64(r.bucket))), ("percent", .number(Rollout.format(r.percent)))]) } ?? .null),
                                   ("files", .int(Int64(p.fetchedFiles.count))), ("fetch_bytes", .int(Int64(p.fetchBytes))),
                                   ("large_files_counted_whole", .int(Int64(p.largeFiles))), ("archive_bytes", .int(Int64(p.archiveBytes)))])
                        .serialized(indent: 2))
                return
            }
            print("channel \(channel) offers version \(v)")
            if from >= v { print("a client on version \(from) has it (or a newer one): no update"); return }
            if let r = p.rollout {
                print("rollout: \(Rollout.format(r.percent))% now; this rollout id's bucket \(r.bucket) of 10000 \(r.takes ? "is in it" : "is not: no update yet")")
                if !r.takes { return }
            }
            let bound = p.largeFiles > 0 ? "at most " : ""
            print("a client on \(from == 0 ? "the bundle" : "version \(from)") fetches \(p.fetchedFiles.count) files, \(bound)\(p.fetchBytes) bytes by range requests (of the \(p.archiveBytes)-byte archive), plus the head and the index pages that changed")
            if p.largeFiles > 0 {
                print("  \(p.largeFiles) of them are chunked files, counted whole: they cost only their changed chunks")
            }
            for f in p.fetchedFiles.prefix(50) { print("  \(f)") }
            if p.fetchedFiles.count > 50 { print("  ... \(p.fetchedFiles.count - 50) more") }
        }
    }
}
