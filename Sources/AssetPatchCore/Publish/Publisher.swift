import Glibc

/// What a release is published from and with (`assetpatch publish`'s options, parsed).
package struct PublishRequest {
    /// The directory holding the release's resources.
    package var source: String
    /// The release repository (created if missing).
    package var repo: String
    /// The signing keys' seeds (several for a threshold); none: an unsigned manifest.
    package var seeds: [[UInt8]] = []
    /// The channel published to (nil: the default channel, the repository's top-level manifest).
    package var channel: String?
    /// A staged rollout (nil: every client).
    package var rollout: Rollout?
    /// Default: the repository's package, else "default".
    package var package: String?
    /// Default: the repository's version + 1 (1 for a new repository).
    package var version: Int64?
    package var label: String?
    /// The app's shipped bundle: files byte-identical to it are left out.
    package var base: String?
    package var minAppVersion: String?
    package var maxAppVersion: String?
    /// When the channel's manifests expire (default: 90 days after the publish).
    package var expiry: Expiry = .standard
    /// Declared plugins (name, path in the release, entry symbol, optional version and ABI tag).
    package var plugins: [PluginDeclaration] = []
    package var notes: String?
    package var mandatory = false
    /// The repository's root on other hosts, listed in its heads for clients (absolute http(s)
    /// URLs ending in "/").
    package var mirrors: [String] = []
    /// An absolute http(s) URL the archive's URL is written under (`<base><sha256>.zip`).
    package var archiveURLBase: String?
    /// Files of at least this many bytes are chunked (0: none is).
    package var chunkThreshold: UInt64 = Publisher.defaultChunkThreshold
    /// A file from `chunkThreshold` that deflate shrinks gets chunks that share history instead
    /// of chunks of their own when these would take more than this percent more bytes
    /// (`ChunkCost`; nil: never).
    package var ownChunkCostLimit: Int? = Publisher.defaultOwnChunkCostLimit
    /// Smaller files of at least this many bytes are chunked with chunks that share history
    /// (`LinkedIndex`; 0: none is).
    package var linkThreshold: UInt64 = Publisher.defaultLinkThreshold
    /// The chunks' average size (a power of two, 4 KiB to 1 MiB).
    package var chunkSize = Publisher.defaultChunkSize
    /// Delta files from this many earlier releases (`DeltaBuilder.earlier`; 0: none).
    package var deltaReleases = Publisher.defaultDeltaReleases
    /// Threads compressing entries (nil: one per processor this process may run on). The
    /// archive is the same whatever the number.
    package var jobs: Int?
    /// Everything is checked and the archive built (to know its size and name), then dropped:
    /// nothing in the repository changes.
    package var dryRun = false
    /// The release's groups, in order: a file is in the first whose patterns match its path.
    package var groups: [GroupRule] = []
    /// Variant files (`name@2x.png`, `name@3x.png`, and a plain `name.png` beside them) in no
    /// other group go to one on-demand group per scale (`GroupRule.scaleGroup`).
    package var scaleGroups = false

    package init(source: String, repo: String) {
        self.source = source
        self.repo = repo
    }
}

/// What a publish wrote.
package struct PublishResult {
    /// The format-1 manifest (`manifest.json`); `head` is the format-2 head (`head.json`).
    package var manifest: Manifest
    package var head: Manifest
    package var chunkedFiles: Int
    package var indexPages: Int
    /// The archive's path relative to the repository (`archives/<sha256>.zip`).
    package var archivePath: String
    package var archiveSize: UInt64
    /// The groups made (empty: none).
    package var groups: [ReleaseGroup] = []
    /// The delta files made, one per earlier release that has files worth one.
    package var deltas: [(version: Int64, built: DeltaBuilder.Built)] = []
}

/// Publishes a release into a repository: the archive under its own sha256 first (each file
/// hashed as it is compressed, in name order so a release's files keep their order from one
/// release to the next and neighbouring changes lie close together), then the manifest (signed
/// when a key is given) with a modification time a second after the previous one's
/// (`MutableFile`). Clients never see a manifest whose archive is missing. Every check a
/// publish makes is here: versions, names, plugins, the archive URL base.
package enum Publisher {
    /// Files of 4 MiB and more are chunked on their own (a full flush after each chunk: clients
    /// since 0.4 fetch their chunks).
    package static let defaultChunkThreshold: UInt64 = 4 << 20
    /// Unless chunks of their own would take more than 5% more bytes than chunks that share
    /// history (text: about three times the bytes): such a file's chunks share history, and
    /// clients before 0.5 fetch it whole (`ChunkCost`). A fresh install's archive then stays
    /// within a few percent of a plain zip's.
    package static let defaultOwnChunkCostLimit: Int? = 5
    /// Files from 64 KiB to the chunk threshold are chunked with chunks that share history
    /// (clients since 0.5 fetch their chunks, earlier ones the whole file): a sync flush and
    /// its chunk's record cost a few dozen bytes where a full flush costs the chunk's history
    /// (several times the bytes on text), and below 64 KiB a file has too few chunks for its
    /// chunk list's page to pay (docs/format.md, "Chunks that share history").
    package static let defaultLinkThreshold: UInt64 = 64 << 10
    /// 8 KiB chunks: see docs/format.md ("Choosing the chunk size") for the measurements behind it.
    package static let defaultChunkSize = 8 << 10
    /// Deltas from the release the channel offers before this one: where most clients are.
    package static let defaultDeltaReleases = 1

    /// One thread per processor this process may run on.
    package static var defaultJobs: Int { availableProcessors() }

    package static func publish(_ r: PublishRequest) throws -> PublishResult {
        let src = FS.absolute(r.source)
        guard FS.isDirectory(src) else { throw AssetPatchError(.argument, "\(r.source): not a directory") }
        let repoDir = FS.absolute(r.repo)
        let channel = r.channel ?? Channel.defaultName
        guard Channel.isValid(channel) else {
            throw AssetPatchError(.argument, "--channel \(channel): 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit")
        }
        if !r.dryRun { try FS.makeDirectories(repoDir + "/archives") }
        // Versions are one sequence across channels: a version names one archive wherever it
        // is offered, so a client moving between channels can tell releases apart by version.
        let current = try ChannelManifests.offered(repo: repoDir, channel: channel)
        let currentVersion = current?.version ?? 0
        let newVersion = r.version ?? ChannelManifests.highestVersion(repo: repoDir) + 1
        if newVersion <= currentVersion {
            throw AssetPatchError(.argument, "version \(newVersion) is not above channel \(channel)'s current version \(currentVersion)")
        }
        if newVersion < 1 { throw AssetPatchError(.argument, "version must be >= 1") }
        if FS.exists(repoDir + "/history/\(newVersion)") {
            throw AssetPatchError(.argument, "version \(newVersion) was published before (history/\(newVersion)): a version names one archive, whichever channel offers it; promote it, or publish a new version")
        }
        for other in ChannelManifests.names(repo: repoDir) where other != channel {
            if let offered = try ChannelManifests.offered(repo: repoDir, channel: other), offered.version == newVersion {
                throw AssetPatchError(.argument, "channel \(other) offers version \(newVersion) already: promote it to channel \(channel), or publish a new version")
            }
        }
        let anyCurrent = current ?? ChannelManifests.names(repo: repoDir).lazy.compactMap { try? ChannelManifests.offered(repo: repoDir, channel: $0) }.first
        let pkg = r.package ?? anyCurrent?.package ?? "default"
        guard PackageName.isValid(pkg) else { throw AssetPatchError(.argument, "package \"\(pkg)\": 1 to 256 bytes, no control characters") }
        for (option, value) in [("--min-app-version", r.minAppVersion), ("--max-app-version", r.maxAppVersion)] {
            if let value, AppVersion.parse(value) == nil { throw AssetPatchError(.argument, "\(option): not a dotted version: \(value)") }
        }
        let urlBase = try r.archiveURLBase.map(checkedURLBase)
        if let keys = try KeyDocuments.newest(repo: repoDir) { try KeyDocuments.checkSigners(r.seeds, against: keys) }
        guard let chunker = Chunker(averageSize: r.chunkSize) else {
            throw AssetPatchError(.argument, "--chunk-size \(r.chunkSize): a power of two from 4 KiB to 1 MiB")
        }
        guard (0...DeltaSource.most).contains(r.deltaReleases) else {
            throw AssetPatchError(.argument, "--deltas \(r.deltaReleases): 0 to \(DeltaSource.most)")
        }

        let names = try FS.walkFiles(src).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        for n in names where !ResourceName.isValid(n) {
            throw AssetPatchError(.argument, "\(src)/\(n): not a valid resource name")
        }
        let kept = try names.filter { try !identicalToBase(r.base, $0, source: src) }
        if kept.contains(where: { $0 == IndexLocation.entryName || $0.hasPrefix(IndexLocation.entryName + "/") }) {
            throw AssetPatchError(.argument, "\(src)/\(IndexLocation.entryName): the name is the release index's")
        }
        var seen = Set<String>()
        for p in r.plugins {
            guard kept.contains(p.path) else { throw AssetPatchError(.argument, "--plugin \(p.name): \(p.path) is not a file of the release") }
            guard seen.insert(p.name).inserted else { throw AssetPatchError(.argument, "--plugin \(p.name): declared twice") }
            try checkPlugin(p, at: src + "/" + p.path)
        }

        let tmpZip = r.dryRun ? FS.temporaryDirectory + "/assetpatch-dry-run-\(getpid()).zip"
            : repoDir + "/archives/.publish-\(getpid()).zip"
        let writer = try ZipWriter(path: tmpZip)
        let sources = kept.map { n in
            let path = src + "/" + n
            let size = FS.fileSize(path) ?? 0
            let chunked = r.chunkThreshold > 0 && size >= r.chunkThreshold
            let linked = !chunked && r.linkThreshold > 0 && size >= r.linkThreshold
            // --link-threshold 0 turns chunks that share history off, from the chunk threshold too.
            return EntrySource(name: n, path: path, chunker: chunked || linked ? chunker : nil, linked: linked,
                               ownChunkCostLimit: r.linkThreshold > 0 ? r.ownChunkCostLimit : nil)
        }
        let indexed = try writer.addFiles(sources, jobs: r.jobs ?? Publisher.defaultJobs)
        let files = indexed.map(\.file)
        // The index last: it lists every file's location. Clients before 0.4 see it as one
        // more file of the format-1 manifest. A linked file stored (deflate saved too little)
        // has chunks that are plain ranges: the main tree lists those.
        var index = try IndexBuilder.build(indexed.map { ($0.file, $0.chunks) }) { indexed[$0].linked }
        let table = try GroupRule.assign(files, r.groups, scales: r.scaleGroups)
        var groupsPage: PageRef?
        if let table {
            let page = try IndexPage.seal(table.encode())
            groupsPage = page.ref
            index.bytes += page.stored  // last: clients before groups never read past the chunk pages
        }
        let indexFile = try writer.addStored(name: IndexLocation.entryName, bytes: index.bytes)
        try writer.finish()
        let zipSHA = try Digest.hexOfFile(tmpZip)
        let zipSize = FS.fileSize(tmpZip) ?? 0
        let archiveName = "archives/\(zipSHA).zip"
        if r.dryRun {
            try FS.unlink(tmpZip)
        } else {
            try FS.rename(tmpZip, repoDir + "/" + archiveName)
            try FS.syncDirectory(repoDir + "/archives")
        }

        var manifest = Manifest(kind: .format1, package: pkg, version: newVersion, label: r.label, created: unixTime(),
                                expires: nil, minAppVersion: r.minAppVersion,
                                archiveURL: urlBase.map { $0 + "\(zipSHA).zip" } ?? archiveName,
                                archiveSize: zipSize, archiveDigest: zipSHA, files: files, plugins: r.plugins,
                                signatureVerified: false, payload: [])
        manifest.mandatory = r.mandatory
        manifest.maxAppVersion = r.maxAppVersion
        guard r.mirrors.count <= 16, r.mirrors.allSatisfy({
            [.http, .https].contains(URLs.scheme($0)) && !$0.hasLineBreak && $0.hasSuffix("/") && !$0.contains("?") && !$0.contains("#")
        }) else {
            throw AssetPatchError(.argument, "--mirror: at most 16 absolute http(s) URLs of the repository's root on other hosts, each ending in \"/\"")
        }
        manifest.mirrors = r.mirrors
        if let notes = r.notes {
            guard notes.utf8.count <= 65536 else { throw AssetPatchError(.argument, "--notes: more than 64 KiB") }
            manifest.notes = notes
        }
        // Deltas from earlier releases, for the clients that have one installed.
        var deltas: [(version: Int64, built: DeltaBuilder.Built)] = []
        for old in DeltaBuilder.earlier(repo: repoDir, channel: channel, below: newVersion, count: r.deltaReleases) {
            if let built = try DeltaBuilder.build(repo: repoDir, old: old, files: files, source: src, dryRun: r.dryRun) {
                deltas.append((old.version, built))
            }
        }
        // The head: the same release, its files in the index.
        var head = manifest
        head.kind = .format2
        head.files = []
        let indexOffset = indexFile.location!.dataOffset
        head.index = IndexLocation(offset: indexOffset, size: indexFile.size, root: index.root, chunkSize: r.chunkSize,
                                   groups: groupsPage, linked: index.linked.map { LinkedIndex(offset: indexOffset + $0.offset, root: $0.root) },
                                   deltas: deltas.map(\.built.source))
        manifest.files.append(indexFile)
        let release = ChannelRelease(manifest: manifest.toJSON(), head: head.toJSON())
        if !r.dryRun { try ChannelManifests.recordHistory(repo: repoDir, release) }
        try ChannelManifests.write(release, repo: repoDir, channel: channel, rollout: r.rollout, expiry: r.expiry, seeds: r.seeds, dryRun: r.dryRun)
        manifest.payload = Array((manifest.toJSON().serialized(indent: 2) + "\n").utf8)
        head.payload = Array((head.toJSON().serialized(indent: 2) + "\n").utf8)
        return PublishResult(manifest: manifest, head: head, chunkedFiles: indexed.filter { !$0.chunks.isEmpty }.count,
                             indexPages: index.pages, archivePath: archiveName, archiveSize: zipSize, groups: table?.groups ?? [], deltas: deltas)
    }

    /// The repository's default channel's manifest, if any (envelopes are opened without
    /// verification).
    package static func currentManifest(repo: String) throws -> Manifest? {
        let path = repo + "/manifest.json"
        guard FS.exists(path) else { return nil }
        return try Manifest.decode(try FS.readFile(path, limit: 256 << 20), source: path)
    }

    /// An absolute http(s) URL without query or fragment, ending in "/".
    static func checkedURLBase(_ base: String) throws -> String {
        guard let scheme = URLs.scheme(base), scheme == .http || scheme == .https, !base.hasLineBreak,
              !base.contains("?"), !base.contains("#") else {
            throw AssetPatchError(.argument, "--archive-url-base \(base): not an absolute http(s) URL without query or fragment")
        }
        return base.hasSuffix("/") ? base : base + "/"
    }

    /// With a base bundle: true when it ships the same bytes under this name (sizes first, then
    /// hashes), so the release leaves the file out.
    static func identicalToBase(_ base: String?, _ name: String, source: String) throws -> Bool {
        guard let base, let size = FS.fileSize(base + "/" + name), size == FS.fileSize(source + "/" + name) else { return false }
        return try Digest.hexOfFile(base + "/" + name) == Digest.hexOfFile(source + "/" + name)
    }

    /// A declared plugin must be an ELF shared object for a known machine whose dynamic symbol
    /// table defines its entry symbol: what a host's load would find out too late.
    static func checkPlugin(_ p: PluginDeclaration, at path: String) throws {
        guard p.name.utf8.count <= 127, p.entry.utf8.count <= 127, !p.entry.isEmpty else {
            throw AssetPatchError(.argument, "--plugin \(p.name): name and entry must be 1 to 127 bytes")
        }
        for (what, value) in [("version", p.version), ("abi", p.abi)] {
            if let value, value.isEmpty || value.utf8.count > 63 {
                throw AssetPatchError(.argument, "--plugin-\(what) \(p.name)=\(value): 1 to 63 bytes")
            }
        }
        let elf: ELFInfo
        do { elf = try ELFInfo.parse(try FS.readFile(path, limit: 1 << 30)) } catch let e as AssetPatchError {
            throw AssetPatchError(.argument, "--plugin \(p.name): \(path): \(e.message)")
        }
        guard ELFInfo.machines[elf.machine] != nil else {
            throw AssetPatchError(.argument, "--plugin \(p.name): \(path): a shared object for an unknown machine (\(elf.machine))")
        }
        guard elf.definedSymbols.contains(p.entry) else {
            throw AssetPatchError(.argument, "--plugin \(p.name): \(path) does not define the entry symbol \(p.entry) in its dynamic symbol table")
        }
    }
}
