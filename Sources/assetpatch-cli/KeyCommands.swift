import ArgumentParser
import AssetPatchCore
import Glibc

/// A public key given on the command line: base64, or a file holding it (`KEY.pub`). A private
/// key file would read as a key too, so files must be `.pub` files.
func readPublicKey(_ value: String) throws -> [UInt8] {
    if let key = Base64.decode(value), key.count == Ed25519.keyLength { return key }
    guard value.hasSuffix(".pub") else {
        throw AssetPatchError(.argument, "\(value): give a base64 public key or a .pub file (never the private key)")
    }
    return try readKeyFile(value)
}

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Key documents: which keys sign manifests, rotated by a threshold of root keys.",
        subcommands: [Create.self, Sign.self, PublishDocument.self, Show.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stage the repository's next key document (unsigned) for the root key holders to sign. It starts from the newest document: what is not given is carried over.")

        @Option(name: .long, help: "The release repository.") var repo: String
        @Option(name: .customLong("root-key"), help: "A root key: base64 or a .pub file (repeatable; replaces the previous document's root keys).")
        var rootKey: [String] = []
        @Option(name: .customLong("root-threshold"), help: "Root keys needed to sign the next document (default: the previous document's, else 1).")
        var rootThreshold: Int?
        @Option(name: .customLong("signing-key"), help: "A manifest-signing key: base64 or a .pub file (repeatable; replaces the previous document's signing keys).")
        var signingKey: [String] = []
        @Option(name: .customLong("signing-threshold"), help: "Signing keys needed on each manifest (default: the previous document's, else 1).")
        var signingThreshold: Int?
        @Flag(name: .long, help: "Allow a document weaker than the previous one: a root key dropped, or a threshold lowered.")
        var weaken = false
        @Option(name: .long, help: "When clients stop accepting it: a duration (365d) or an RFC 3339 time.") var expires: String = "365d"
        @Option(name: .long, help: "Where to write the staged document (default REPO/keys/staged.json).") var out: String?

        func run() throws {
            try cli {
                let dir = FS.absolute(repo)
                let previous = try KeyDocuments.newest(repo: dir)
                func set(_ what: String, _ given: [String], _ threshold: Int?, _ before: KeySet?) throws -> KeySet {
                    let keys = given.isEmpty ? before?.keys ?? [] : try given.map(readPublicKey)
                    guard !keys.isEmpty else { throw AssetPatchError(.argument, "--\(what)-key: the first key document needs 1 to \(KeySet.maxKeys) keys") }
                    guard keys.count <= KeySet.maxKeys, Set(keys).count == keys.count else {
                        throw AssetPatchError(.argument, "--\(what)-key: 1 to \(KeySet.maxKeys) distinct keys")
                    }
                    let t = threshold ?? before?.threshold ?? 1
                    guard t >= 1, t <= keys.count else {
                        let carried = threshold == nil && before != nil ? " (carried over from document \(previous!.version))" : ""
                        throw AssetPatchError(.argument, "--\(what)-threshold \(t)\(carried): from 1 to the number of \(what) keys (\(keys.count)); give --\(what)-threshold")
                    }
                    return KeySet(keys: keys, threshold: t)
                }
                let root = try set("root", rootKey, rootThreshold, previous?.root)
                let signing = try set("signing", signingKey, signingThreshold, previous?.signing)
                if let previous {
                    let weaker = KeyDocuments.weakenings(from: previous, root: root, signing: signing)
                    if !weaker.isEmpty && !weaken {
                        throw AssetPatchError(.argument, "document \(previous.version + 1) would be weaker than document \(previous.version): \(weaker.joined(separator: "; ")); pass --weaken if that is meant")
                    }
                }
                let until = RFC3339.parse(expires) ?? parseDuration(expires).map { unixTime() + $0 }
                guard let until else { throw AssetPatchError(.argument, "--expires \(expires): a duration (365d) or an RFC 3339 time") }
                let doc = try KeyDocuments.create(repo: dir, root: root, signing: signing, expires: until)
                let path = out ?? dir + "/\(KeyDocuments.directoryName)/staged.json"
                try FS.makeDirectories(FS.parent(of: FS.absolute(path)))
                try FS.writeAtomically(path, doc.serialized())
                print("\(path): staged")
                for line in KeyDocuments.describe(doc, previous: previous) { print(line) }
                print("it needs: " + KeyDocuments.missing(doc, repo: dir).joined(separator: "; "))
            }
        }
    }

    struct Sign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a staged key document, then add one root key's signature to it (each holder on their own machine).")

        @Argument(help: "The staged key document.") var document: String
        @Option(name: .long, help: "The private key file.") var key: String
        @Flag(name: .customLong("allow-readable-key"), help: "Use a private key file other users can read.") var allowReadableKey = false
        @Option(name: .long, help: "The repository: show what changes from its newest document, and what the document still needs.")
        var repo: String?
        @Option(name: .long, help: "The document this one follows (keys/N.json), when the repository is not at hand: show what changes.")
        var previous: String?
        @Flag(name: .long, help: "Sign without asking (when the standard input is a terminal, the tool asks).") var yes = false

        func run() throws {
            try cli {
                var doc = try KeyDocument.decode(try FS.readFile(document, limit: KeyDocument.maxBytes, limitStatus: .argument), source: document)
                let seed = try readPrivateKey(key, allowReadable: allowReadableKey)
                var before: KeyDocument?
                if let previous {
                    before = try KeyDocument.decode(try FS.readFile(previous, limit: KeyDocument.maxBytes, limitStatus: .argument), source: previous)
                } else if let repo, doc.version > 1 {
                    before = try? KeyDocuments.load(repo: FS.absolute(repo), version: doc.version - 1)
                }
                for line in KeyDocuments.describe(doc, previous: before) { print(line) }
                if before == nil && doc.version > 1 {
                    print("  (give --repo or --previous to see what changes from document \(doc.version - 1))")
                }
                if !yes && isatty(0) == 1 {
                    print("sign key document \(doc.version) with \(Ed25519.keyID(try Ed25519.publicKey(fromSeed: seed)))? [y/N] ", terminator: "")
                    guard let answer = readLine(), answer.lowercased() == "y" || answer.lowercased() == "yes" else {
                        throw AssetPatchError(.argument, "not signed")
                    }
                }
                try doc.sign(seed: seed)
                try FS.writeAtomically(document, doc.serialized())
                let missing = KeyDocuments.missing(doc, repo: repo.map(FS.absolute))
                print("\(document): signed by \(Ed25519.keyID(try Ed25519.publicKey(fromSeed: seed)))"
                      + (missing.isEmpty ? "; its thresholds are met" : "; still needs " + missing.joined(separator: "; ")))
            }
        }
    }

    struct PublishDocument: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "publish",
            abstract: "Publish a staged key document as keys/<version>.json once its signatures meet the thresholds.")

        @Option(name: .long, help: "The release repository: a directory, or s3://BUCKET/PREFIX (pulled, written, pushed back).") var repo: String
        @OptionGroup var remote: RemoteRepositoryOptions
        @Argument(help: "The staged document (default REPO/keys/staged.json; with s3://, the working copy's).") var document: String?
        @Option(name: .customLong("pinned-key"), help: "For the first document: a key clients pin in public_keys (repeatable); one of them must have signed it.")
        var pinnedKey: [String] = []
        @Flag(name: .customLong("dry-run"), help: "Check the document as publishing would; write nothing.") var dryRun = false
        @Flag(name: .customLong("no-pinned-key"),
              help: "The first document for clients that pin a key document (option key_document), not public_keys: no pinned key signed it.")
        var noPinnedKey = false

        func run() throws {
            try remote.within(repo, signing: nil, dryRun: dryRun) { dir in try cli {
                let dir = FS.absolute(dir)
                let path = document ?? dir + "/\(KeyDocuments.directoryName)/staged.json"
                let doc = try KeyDocument.decode(try FS.readFile(path, limit: KeyDocument.maxBytes, limitStatus: .argument), source: path)
                if doc.version == 1 && KeyDocuments.versions(repo: dir).isEmpty && pinnedKey.isEmpty && !noPinnedKey {
                    throw AssetPatchError(.argument, "key document 1 follows the keys clients pin: give them with --pinned-key (one must have signed it), or --no-pinned-key when clients pin this document itself (option key_document)")
                }
                let written = try KeyDocuments.publish(doc, repo: dir, pinned: try pinnedKey.map(readPublicKey), dryRun: dryRun)
                if dryRun {
                    print("would publish \(written): key document \(doc.version) follows the chain and meets its thresholds")
                    return
                }
                // The staged copy in the served tree goes, whichever copy was published.
                let staged = dir + "/\(KeyDocuments.directoryName)/staged.json"
                if document == nil || (try? KeyDocument.decode(try FS.readFile(staged, limit: KeyDocument.maxBytes), source: staged))?.version == doc.version {
                    try? FS.unlink(staged)
                }
                print("\(written): key document \(doc.version) published; re-sign every channel (assetpatch resign) with \(doc.signing.described)")
                if doc.version == 1 && pinnedKey.isEmpty {
                    print("note: clients that pin public_keys accept document 1 only if one of their pinned keys signed it; it was published for clients that pin it (key_document)")
                }
            } }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the repository's key documents and check each link of the chain.")

        @Option(name: .long, help: "The release repository.") var repo: String

        func run() throws {
            try cli {
                let dir = FS.absolute(repo)
                var previous: KeyDocument?
                let versions = KeyDocuments.versions(repo: dir)
                if versions.isEmpty { print("no key documents: manifests are judged by the keys clients pin") }
                for v in versions {
                    let doc = try KeyDocuments.load(repo: dir, version: v)
                    var check = "signed by a threshold of its own root keys"
                    if let previous { try doc.verify(after: previous, source: "version \(v)"); check = "follows version \(previous.version)" } else {
                        try doc.verifySelf(source: "version \(v)")
                    }
                    let expired = (doc.expires ?? Int64.max) <= unixTime() ? " EXPIRED" : ""
                    print("version \(v): root \(doc.root.described); signing \(doc.signing.described); expires \(RFC3339.format(doc.expires ?? 0))\(expired); \(check)")
                    previous = doc
                }
            }
        }
    }
}
