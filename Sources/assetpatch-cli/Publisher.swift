import ArgumentParser
import AssetPatchCore
import Glibc

struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create an Ed25519 signing key (KEYFILE, 0600) and KEYFILE.pub.")

    @Option(name: .long, help: "Where to write the private key.") var out: String

    func run() throws {
        try cli {
            if FS.exists(out) { throw AssetPatchError(.argument, "\(out) exists; refusing to overwrite a key") }
            let (seed, pub) = try Ed25519.generate()
            try FS.writeAtomically(out, Array((Base64.encode(seed) + "\n").utf8), mode: 0o600)
            try FS.writeAtomically(out + ".pub", Array((Base64.encode(pub) + "\n").utf8))
            print(Base64.encode(pub))
            printError("key id \(Ed25519.keyID(pub)) (errors and key documents name keys by it); private key \(out) (0600), public key \(out).pub")
        }
    }
}

/// Reads a base64 key file (private seed or public key) of 32 bytes.
func readKeyFile(_ path: String) throws -> [UInt8] {
    let text = String(decoding: try FS.readFile(path, limit: 4096), as: UTF8.self).trimmingCharacters(in: " \t\r\n")
    guard let key = Base64.decode(text), key.count == Ed25519.keyLength else {
        throw AssetPatchError(.argument, "\(path): not a base64 Ed25519 key")
    }
    return key
}

struct Publish: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Build a release archive and manifest from a directory into a release repository.")

    @Argument(help: "The directory holding the release's resources.") var source: String
    @Option(name: .long, help: "The release repository (created if missing): a directory, or s3://BUCKET/PREFIX (pulled, written, pushed back).") var repo: String
    @OptionGroup var signing: SigningOptions
    @OptionGroup var remote: RemoteRepositoryOptions
    @Option(name: .long, help: "Publish to this channel (channels/NAME/ in the repository; default: the top-level manifest, channel \"stable\").")
    var channel: String?
    @Option(name: .long, help: "Offer the release to this share of clients only (0 to 100, fractions allowed; 0 publishes it halted).")
    var rollout: String?
    @Option(name: .customLong("rollout-schedule"), help: "Raise the share over time: WHEN=PERCENT,... where WHEN is a duration after now (30m, 12h, 2d) or an RFC 3339 time, e.g. 1d=10,3d=50,7d=100.")
    var rolloutSchedule: String?
    @Option(name: .long, help: "Package name (default: the repository's, else \"default\").") var package: String?
    @Option(name: .long, help: "Release version (default: current + 1).") var version: Int64?
    @Option(name: .long, help: "A label for people.") var label: String?
    @Option(name: .long, help: "The app's shipped bundle: leave out files identical to it.") var base: String?
    @Option(name: .customLong("min-app-version"), help: "Oldest app version this release works with.") var minAppVersion: String?
    @Option(name: .customLong("max-app-version"), help: "Newest app version this release is built for.") var maxAppVersion: String?
    @Option(name: .long, help: "Plugin declaration NAME=PATH:ENTRY (repeatable): a shared object of the release and its entry symbol.")
    var plugin: [String] = []
    @Option(name: .customLong("plugin-version"), help: "NAME=VERSION: a declared plugin's own version (repeatable).") var pluginVersion: [String] = []
    @Option(name: .customLong("plugin-abi"), help: "NAME=TAG: an ABI tag hosts check before using the plugin (repeatable).") var pluginABI: [String] = []
    @Option(name: .long, help: "A file of release notes for people (UTF-8, at most 64 KiB).") var notes: String?
    @Flag(name: .long, help: "Ask apps to install this release before going on (the app decides).") var mandatory = false
    @Option(name: .long, help: "The repository's root on another host, ending in / (repeatable): listed in the signed head, so clients that verify it fall back to that host when manifest_url fails (option head_mirrors).")
    var mirror: [String] = []
    @Option(name: .customLong("archive-url-base"),
            help: "Write the archive's URL as this absolute http(s) URL followed by <sha256>.zip, for hosts where the manifest's URL redirects elsewhere (release assets, presigned URLs).")
    var archiveURLBase: String?
    @Option(name: .customLong("chunk-threshold"),
            help: "Cut files of at least this many bytes into chunks that each decode on their own, which clients since 0.4 fetch, unless --chunk-cost-limit gives them chunks that share history (default 4194304; 0: none, and every file from --link-threshold up has chunks that share history).")
    var chunkThreshold: UInt64 = Publisher.defaultChunkThreshold
    @Option(name: .customLong("chunk-cost-limit"),
            help: "PERCENT|none: a file from --chunk-threshold that deflate shrinks gets chunks that share history instead when chunks of their own would take more than PERCENT% more archive bytes (text takes about 3 times as many); none: never (default 5).")
    var chunkCostLimit: String = String(Publisher.defaultOwnChunkCostLimit ?? 0)
    @Option(name: .customLong("link-threshold"),
            help: "Cut smaller files of at least this many bytes into chunks that share history: clients since 0.5 fetch the chunks that changed, earlier ones the whole file (default 65536; 0: none, at any size).")
    var linkThreshold: UInt64 = Publisher.defaultLinkThreshold
    @Option(name: .customLong("chunk-size"), help: "Average chunk size: a power of two from 4096 to 1048576 (default 8192).")
    var chunkSize: Int = Publisher.defaultChunkSize
    @Option(name: .long, help: "Threads compressing files (default: one per processor). The archive is the same whatever the number.")
    var jobs: Int?
    @Option(name: .long, help: "Write delta files from this many earlier releases (0 to 8; default 1: the one the channel offers now): a client that has one installed fetches its changed files as deltas against their old bytes.")
    var deltas: Int = Publisher.defaultDeltaReleases
    @Option(name: .long, help: "NAME=PATTERN (repeatable): files whose paths match the shell pattern (its * matching / too) make the on-demand group NAME; a file is in the first group that matches it.")
    var group: [String] = []
    @Option(name: .customLong("install-group"), help: "NAME=PATTERN (repeatable): as --group, for a group installed with every update.")
    var installGroup: [String] = []
    @Flag(name: .customLong("scale-groups"), help: "Put variant files in no other group into one on-demand group per scale: scale-3x (a@3x.png), scale-2x, and scale-1x (a.png beside them).")
    var scaleGroups = false
    @Flag(name: .long, help: "Print what was published as JSON.") var json = false
    @Flag(name: .customLong("dry-run"), help: "Check everything and build the archive to report its size; change nothing in the repository.")
    var dryRun = false

    /// --chunk-cost-limit: a percent (0 to 1000), or nil for none.
    func ownChunkCostLimit() throws -> Int? {
        if chunkCostLimit == "none" { return nil }
        guard let n = Int(chunkCostLimit), (0...1000).contains(n) else {
            throw AssetPatchError(.argument, "--chunk-cost-limit \(chunkCostLimit): a percent from 0 to 1000, or none")
        }
        return n
    }

    /// The --group and --install-group options in the order given (`--group` ones first).
    func groupRules() throws -> [GroupRule] {
        var rules: [GroupRule] = []
        for (option, values, delivery) in [("--group", group, ReleaseGroup.Delivery.onDemand), ("--install-group", installGroup, .install)] {
            for v in values {
                guard let eq = v.firstIndex(of: "="), eq != v.startIndex, v.index(after: eq) != v.endIndex else {
                    throw AssetPatchError(.argument, "\(option) \(v): expected NAME=PATTERN")
                }
                let name = String(v[..<eq]), pattern = String(v[v.index(after: eq)...])
                if let i = rules.firstIndex(where: { $0.name == name }) {
                    guard rules[i].delivery == delivery else { throw AssetPatchError(.argument, "\(option) \(name): given as --group and --install-group") }
                    rules[i].patterns.append(pattern)
                } else {
                    rules.append(GroupRule(name: name, delivery: delivery, patterns: [pattern]))
                }
            }
        }
        return rules
    }

    func run() throws {
        try remote.within(repo, signing: signing, dryRun: dryRun) { dir in try cli {
            var r = PublishRequest(source: source, repo: dir)
            if let jobs {
                guard (1...1024).contains(jobs) else { throw AssetPatchError(.argument, "--jobs \(jobs): 1 to 1024") }
                r.jobs = jobs
            }
            r.chunkThreshold = chunkThreshold
            r.ownChunkCostLimit = try ownChunkCostLimit()
            r.linkThreshold = linkThreshold
            r.chunkSize = chunkSize
            r.deltaReleases = deltas
            r.seeds = try signing.seeds()
            r.dryRun = dryRun
            r.expiry = try signing.expiry(default: .standard)
            r.channel = channel
            r.rollout = try parseRollout(percent: rollout, schedule: rolloutSchedule, halt: false)
            r.package = package
            r.version = version
            r.label = label
            r.base = base
            r.minAppVersion = minAppVersion
            r.maxAppVersion = maxAppVersion
            r.mandatory = mandatory
            r.mirrors = mirror
            r.archiveURLBase = archiveURLBase
            r.groups = try groupRules()
            r.scaleGroups = scaleGroups
            if let notes {
                let bytes = try FS.readFile(notes, limit: 65536, limitStatus: .argument)
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    throw AssetPatchError(.argument, "--notes \(notes): not UTF-8 text")
                }
                r.notes = text
            }
            for p in plugin {
                guard let eq = p.firstIndex(of: "="), let colon = p.lastIndex(of: ":"), eq < colon else {
                    throw AssetPatchError(.argument, "--plugin \(p): expected NAME=PATH:ENTRY")
                }
                r.plugins.append(PluginDeclaration(name: String(p[..<eq]), path: String(p[p.index(after: eq)..<colon]),
                                                   entry: String(p[p.index(after: colon)...])))
            }
            for (option, values) in [("--plugin-version", pluginVersion), ("--plugin-abi", pluginABI)] {
                for v in values {
                    guard let eq = v.firstIndex(of: "="), let i = r.plugins.firstIndex(where: { $0.name == v[..<eq] }) else {
                        throw AssetPatchError(.argument, "\(option) \(v): expected NAME=VALUE for a plugin declared with --plugin")
                    }
                    let value = String(v[v.index(after: eq)...])
                    if option == "--plugin-version" { r.plugins[i].version = value } else { r.plugins[i].abi = value }
                }
            }
            if package == nil, !FS.exists(FS.absolute(dir) + "/manifest.json"), ChannelManifests.names(repo: FS.absolute(dir)).isEmpty {
                printError("warning: the repository's first publish without --package: its package is \"default\", and clients that name theirs (option package, a bundle marker) refuse it; give --package NAME")
            }
            let done = try Publisher.publish(r)
            let m = done.manifest
            let files = m.files.filter { $0.path != IndexLocation.entryName }
            let total = files.reduce(UInt64(0)) { $0 + $1.size }
            let chunked = done.chunkedFiles > 0 ? " (\(done.chunkedFiles) chunked)" : ""
            if json {
                let head = try? ChannelManifests.read(repo: FS.absolute(dir), channel: channel ?? Channel.defaultName)?.head
                print(JSON.object([("package", .string(m.package ?? "default")), ("version", .int(m.version)),
                                   ("channel", .string(channel ?? Channel.defaultName)), ("files", .int(Int64(files.count))),
                                   ("chunked_files", .int(Int64(done.chunkedFiles))), ("bytes", .int(Int64(total))),
                                   ("archive", .string(done.archivePath)), ("archive_bytes", .int(Int64(done.archiveSize))),
                                   ("index_pages", .int(Int64(done.indexPages))), ("signed", .bool(!r.seeds.isEmpty)),
                                   ("deltas", .array(done.deltas.map { v, d in
                                       .object([("from_version", .int(v)), ("url", .string(d.source.url)), ("files", .int(Int64(d.deltas))),
                                                ("bytes", .int(Int64(d.deltaBytes))), ("archive_bytes", .int(Int64(d.archiveBytes)))]) })),
                                   ("rollout", r.rollout.map { .string($0.summary) } ?? .null),
                                   ("revision", head?["revision"] ?? .null), ("expires", head?["expires"] ?? .null),
                                   ("groups", .array(done.groups.map { g in
                                       .object([("name", .string(g.name)), ("delivery", .string(g.delivery.name)), ("files", .int(Int64(g.files))),
                                                ("bytes", .int(Int64(g.size))), ("archive_bytes", .int(Int64(g.storedBytes)))]) }))]).serialized(indent: 2))
                return
            }
            print("\(dryRun ? "would have " : "")published \(m.package ?? "default") version \(m.version): \(files.count) files\(chunked), \(total) bytes, archive \(done.archivePath) (\(done.archiveSize) bytes), index \(done.indexPages) pages\(r.seeds.isEmpty ? "" : ", signed")\(channel.map { ", channel \($0)" } ?? "")\(r.rollout.map { ", rollout \($0.summary)" } ?? "")")
            for (version, d) in done.deltas {
                print("  deltas from version \(version): \(d.source.url), \(d.deltas) files, \(d.deltaBytes) bytes (their archive bytes: \(d.archiveBytes))")
            }
            for g in done.groups {
                print("  group \(g.name) (\(g.delivery.name)): \(g.files) files, \(g.size) bytes, \(g.storedBytes) in the archive")
            }
        } }
    }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check a repository's manifest, signature, archive and every file hash.")

    @Argument(help: "The release repository.") var repo: String
    @Option(name: .customLong("public-key"), help: "Trusted base64 Ed25519 public key (repeatable).") var publicKey: [String] = []
    @Option(name: .customLong("public-key-file"), help: "File holding a trusted base64 public key.") var publicKeyFile: String?
    @Option(name: .long, help: "The channel to verify (default: stable, the top-level manifest).") var channel: String = Channel.defaultName

    func run() throws {
        try cli {
            let repoDir = FS.absolute(repo)
            var keys: [[UInt8]] = []
            for k in publicKey {
                guard let key = Base64.decode(k), key.count == Ed25519.keyLength else {
                    throw AssetPatchError(.argument, "--public-key: not a base64 Ed25519 public key")
                }
                keys.append(key)
            }
            if let publicKeyFile { keys.append(try readKeyFile(publicKeyFile)) }
            guard Channel.isValid(channel) else { throw AssetPatchError(.argument, "\(channel): not a channel name") }
            let channelDir = ChannelManifests.directory(repo: repoDir, channel: channel)
            let path = channelDir + "/manifest.json"
            // With pinned keys and key documents, manifests are judged by the newest document the
            // chain leads to from the pinned keys, as clients judge them.
            var signing: KeySet? = keys.isEmpty ? nil : KeySet(keys: keys, threshold: 1)
            if !keys.isEmpty {
                var current = KeyDocument.pinned(keys)
                for v in KeyDocuments.versions(repo: repoDir) {
                    let doc = try KeyDocuments.load(repo: repoDir, version: v)
                    try doc.verify(after: current, source: "\(repoDir)/keys/\(v).json")
                    current = doc
                }
                signing = current.signing
            }
            let m = try Manifest.decode(try FS.readFile(path, limit: 256 << 20), source: path) { _ in signing }
            if m.channelName != channel {
                throw AssetPatchError(.manifest, "\(path): names channel \"\(m.channelName)\", but lies in channel \(channel)'s place")
            }
            guard m.kind == .format1 else { throw AssetPatchError(.manifest, "\(path): a legacy manifest; nothing to verify beyond its md5") }
            let archiveURL = URLs.resolve(m.archiveURL, against: URLs.fileURL(forPath: path))
            // An absolute http(s) archive URL (publish --archive-url-base) names the uploaded
            // copy; the repository keeps the archive under its sha256.
            let local = URLs.filePath(archiveURL) ?? (URLs.scheme(m.archiveURL).map { $0 == .http || $0 == .https } == true
                ? repoDir + "/archives/\(m.archiveDigest).zip" : nil)
            guard let archivePath = local else {
                throw AssetPatchError(.manifest, "archive URL \(m.archiveURL) is not inside the repository")
            }
            guard let size = FS.fileSize(archivePath) else { throw AssetPatchError(.io, "\(archivePath): missing") }
            if size != m.archiveSize { throw AssetPatchError(.integrity, "\(archivePath): \(size) bytes, the manifest says \(m.archiveSize ?? 0)") }
            let sha = try Digest.hexOfFile(archivePath)
            if sha != m.archiveDigest { throw AssetPatchError(.integrity, "\(archivePath): sha256 \(sha), the manifest says \(m.archiveDigest)") }
            let zip = try ZipReader(path: archivePath)
            let hashes = Dictionary(m.files.map { ($0.path, $0.sha256) }, uniquingKeysWith: { a, _ in a })
            let buffers = ZipBuffers()
            for e in try zip.fileEntries(matching: m.files) {
                let d = try Digest(.sha256)
                try zip.extract(e, buffers: buffers) { d.update($0) }
                if d.finalHex() != hashes[e.name] {
                    throw AssetPatchError(.integrity, "\(archivePath): entry \(e.name) does not match the manifest's sha256")
                }
            }
            var detail = ""
            let headPath = channelDir + "/head.json"
            if FS.exists(headPath) {
                let head = try Manifest.decode(try FS.readFile(headPath, limit: 256 << 20), source: headPath) { _ in signing }
                guard head.archiveDigest == m.archiveDigest, head.version == m.version, head.package == m.package else {
                    throw AssetPatchError(.manifest, "\(headPath): describes \(head.package ?? "default") version \(head.version) (archive \(head.archiveDigest)), manifest.json \(m.package ?? "default") version \(m.version) (archive \(m.archiveDigest))")
                }
                let r = try HeadCheck.verify(head, archive: archivePath, formatOneFiles: m.files, source: headPath)
                detail = "; head.json: \(r.pages) index pages, \(r.chunks) chunks of \(r.chunkedFiles) chunked files verified"
            }
            let signed = m.signatureVerified ? ", signature verified (\(signing?.described ?? ""))"
                : "; no signature was checked (give --public-key or --public-key-file: the keys clients pin)"
            let count = m.files.filter { $0.path != IndexLocation.entryName }.count
            print("ok: \(m.package ?? "default") version \(m.version), \(count) files verified\(signed)\(detail)")
        }
    }
}

struct Inspect: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a repository's or URL's manifest (decoding the envelope).")

    @Argument(help: "A release repository directory or a manifest URL.") var target: String
    @Flag(name: .long, help: "Print the decoded manifest as JSON.") var json = false
    @Option(name: .customLong("data-dir"), help: "A client's data directory: also show what an update of it would fetch (nothing is downloaded, nothing in it changes).")
    var dataDir: String?
    @Option(name: .customLong("bundle-dir"), help: "With --data-dir: the app's shipped resources.") var bundleDir: String?

    func run() throws {
        try cli {
            let bytes: [UInt8]
            let source: String
            if URLs.scheme(target) == .http || URLs.scheme(target) == .https {
                let http = HTTPClient(settings: HTTPSettings(), cancel: CancelToken())
                bytes = try http.fetch(target, limit: 256 << 20, limitStatus: .manifest).body
                source = target
            } else {
                var path = URLs.filePath(target) ?? target
                if FS.isDirectory(path) { path += "/manifest.json" }
                bytes = try FS.readFile(path, limit: 256 << 20, limitStatus: .manifest)
                source = path
            }
            let m = try Manifest.decode(bytes, source: source)
            var preview: UpdatePreview?
            if let dataDir {
                let c = try Client(dataDir: dataDir, bundleDir: bundleDir, countsLaunch: false)
                defer { c.close() }
                let url = URLs.scheme(target) == .http || URLs.scheme(target) == .https ? target : URLs.fileURL(forPath: FS.absolute(source))
                try c.set("manifest_url", url)
                preview = try c.preview(recordAcceptance: false)
            }
            if json {
                if dataDir != nil {
                    let manifest = m.kind == .legacy ? JSON.object([("url", .string(m.archiveURL)), ("md5", .string(m.archiveDigest))])
                        : (try? JSONParser.parse(m.payload)) ?? .null
                    print(JSON.object([("manifest", manifest), ("update", preview.map(previewJSON) ?? .null)]).serialized(indent: 2))
                    return
                }
                if m.kind == .legacy {
                    print(JSON.object([("url", .string(m.archiveURL)), ("md5", .string(m.archiveDigest))]).serialized(indent: 2))
                } else {
                    print((try? JSONParser.parse(m.payload))?.serialized(indent: 2) ?? String(decoding: m.payload, as: UTF8.self))
                }
                return
            }
            if m.kind == .legacy {
                print("legacy manifest: \(m.archiveURL) md5 \(m.archiveDigest)")
                return
            }
            print("package:  \(m.package ?? "default")")
            print("version:  \(m.version)\(m.label.map { " (\($0))" } ?? "")")
            if let c = m.created { print("created:  \(RFC3339.format(c))") }
            if let s = m.signed { print("signed:   \(RFC3339.format(s)) (revision \(m.revision) of the channel)") }
            print("expires:  \(expiryLine(m.expires))")
            if let v = m.minAppVersion { print("min app:  \(v)") }
            if let v = m.maxAppVersion { print("max app:  \(v)") }
            print("archive:  \(m.archiveURL) (\(m.archiveSize ?? 0) bytes, sha256 \(m.archiveDigest))")
            print("channel:  \(m.channelName)")
            if let r = m.rollout {
                print("rollout:  \(r.summary); now \(Rollout.format(r.percent(at: unixTime())))%\(r.percent(at: unixTime()) == 0 ? " (halted)" : "")")
            } else {
                print("rollout:  every client")
            }
            if let k = m.keys { print("keys:     signed under key document \(k.version) (\(k.url))") }
            if let index = m.index {
                print("index:    root \(index.root.hex) (\(index.root.compressedSize) bytes), \(index.size) bytes at archive offset \(index.offset); chunks of \(index.chunkSize) bytes on average")
                print("files:    listed in the index (manifest.json beside this head lists them too)")
            } else {
                print("files:    \(m.files.count), \(m.releaseBytes) bytes")
            }
            for f in m.files.prefix(50) { print("  \(f.size)\t\(f.path)") }
            if m.files.count > 50 { print("  ... \(m.files.count - 50) more") }
            for p in m.plugins {
                print("plugin:   \(p.name) = \(p.path) : \(p.entry)" + (p.version.map { " version \($0)" } ?? "") + (p.abi.map { " abi \($0)" } ?? ""))
            }
            if m.mandatory { print("mandatory: yes") }
            if let notes = m.notes { print("notes:\n" + notes.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n")) }
            let located = m.index != nil || m.files.contains { $0.location != nil }
            print("ranges:   \(located ? "every file's location is listed (differential updates possible)" : "no file locations (updates download the whole archive)")")
            if dataDir != nil {
                if let preview { printPreview(preview) } else { print("next:     no update for this data directory") }
            }
        }
    }
}

struct StampBundle: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stamp-bundle",
        abstract: "Mark an app's bundle as carrying a release, so installed releases up to it stop shadowing it.")

    @Argument(help: "The bundle directory the app ships.") var bundle: String
    @Option(name: .long, help: "A release repository: stamp its current package and version.") var repo: String?
    @Option(name: .long, help: "The package (instead of --repo).") var package: String?
    @Option(name: .long, help: "The release version the bundle carries (instead of --repo).") var version: Int64?

    func run() throws {
        try cli {
            var pkg = package, ver = version
            if let repo {
                let path = FS.absolute(repo) + "/manifest.json"
                let m = try Manifest.decode(try FS.readFile(path, limit: 256 << 20, limitStatus: .manifest), source: path)
                guard !m.isLegacy else { throw AssetPatchError(.manifest, "\(path): a legacy manifest has no version") }
                pkg = pkg ?? m.package
                ver = ver ?? m.version
            }
            guard let pkg, let ver, ver >= 1 else { throw AssetPatchError(.argument, "give --repo, or --package and --version (>= 1)") }
            guard FS.isDirectory(bundle) else { throw AssetPatchError(.io, "\(bundle): not a directory") }
            try BundleMarker.write(bundle, package: pkg, version: ver)
            print("\(bundle)/\(BundleMarker.fileName): package \(pkg), version \(ver)")
        }
    }
}

/// A manifest's expiry for people: when, and a warning when it is near or past.
func expiryLine(_ expires: Int64?) -> String {
    guard let expires else { return "never (a copy of it, replayed, stays valid; publish with --expires to change that)" }
    let left = expires - unixTime()
    if left <= 0 { return "\(RFC3339.format(expires)) EXPIRED: clients refuse it; sign the channel again (assetpatch resign)" }
    if left < 14 * 86400 { return "\(RFC3339.format(expires)), in \(left / 3600) hours: sign the channel again before (assetpatch resign)" }
    return "\(RFC3339.format(expires)) (in \(left / 86400) days)"
}
