import ArgumentParser
import AssetPatchCore
import Glibc

/// `assetpatch report`: the release manager's page.
struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write one self-contained HTML page about a repository (channels, rollouts and halts over time, the key chain, what each older version's update costs, and with --events the rollout's health per step), from its files alone.")

    @Argument(help: "The release repository.") var repo: String
    @Option(name: .long, help: "The page to write (default: report.html).") var out: String = "report.html"
    @Option(name: .long, help: "Outcome events as JSON lines (repeatable; - reads stdin): the rollout's health per step.")
    var events: [String] = []
    @Option(name: .long, help: "The rollout policy the health is judged by (as rollout advance; default its defaults).") var policy: String?
    @Flag(name: .long, help: "Print what the page shows as JSON instead of writing it.") var json = false

    func run() throws {
        try cli {
            let dir = FS.absolute(repo)
            let inputs = try events.map { name -> (name: String, bytes: [UInt8]) in
                (name, name == "-" ? try readStdin() : try FS.readFile(name, limit: 4 << 30, limitStatus: .argument))
            }
            let rules = try policy.map { try RolloutPolicy.decode(try FS.readFile($0, limit: 1 << 20, limitStatus: .argument), source: $0) }
            let report = try RepositoryReport.make(repo: dir, events: inputs, policy: rules)
            if json {
                print(report.toJSON().serialized(indent: 2))
                return
            }
            try FS.writeAtomically(FS.absolute(out), Array(ReportPage.html(report).utf8))
            print("wrote \(out): \(report.channels.count) channels, \(report.signings.count) signings, \(report.keys.count) key documents, \(report.versions.count) versions")
        }
    }
}
