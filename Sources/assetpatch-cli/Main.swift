import ArgumentParser
import AssetPatchCore
import Glibc

/// A failure that ends the command with exit status 3, printed as "STATUS_NAME: message".
struct CLIFailure: Error {
    var status: Status?
    var message: String
}

extension AssetPatchError {
    var cli: CLIFailure { CLIFailure(status: status, message: message) }
}

func writeStderr(_ text: String) {
    var t = text
    t.withUTF8 { b in
        var off = 0
        while off < b.count {
            let n = write(STDERR_FILENO, b.baseAddress! + off, b.count - off)
            if n <= 0 { break }
            off += n
        }
    }
}

func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    writeStderr(line)
}

/// Runs `body` and converts library errors to `CLIFailure`.
func cli<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch let e as AssetPatchError { throw e.cli }
}

@main
struct AssetPatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assetpatch",
        abstract: "Publish hot-updatable resource releases and drive the assetpatch client.",
        version: AssetPatchVersion.string,
        subcommands: [Keygen.self, Publish.self, Promote.self, RolloutCommand.self, Resign.self, RollbackRelease.self, Plan.self, Keys.self,
                      Verify.self, Inspect.self,
                      Update.self, Check.self, Resolve.self, StatusCommand.self, GroupsCommand.self, GroupCommand.self, MarkGood.self, Rollback.self, Reset.self, StampBundle.self, Events.self, Report.self, Push.self, Pull.self, GC.self]
    )

    /// Exit statuses: 0 success, 1 usage, 2 no update (check), 3 any other failure.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let failure as CLIFailure {
            if let s = failure.status { printError("\(s.name): \(failure.message)") } else { printError(failure.message) }
            Glibc.exit(3)
        } catch let code as ExitCode {
            Glibc.exit(code.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            printError(fullMessage(for: error))
            Glibc.exit(1)
        }
    }
}
