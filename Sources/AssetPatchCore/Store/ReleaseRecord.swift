import Glibc

/// What a release directory records about itself (`releases/<id>/release.json`).
package struct ReleaseRecord: Sendable {
    package var version: Int64
    package var files: [ManifestFile]
    package var plugins: [PluginDeclaration]
    package var signatureVerified: Bool
    package var archiveDigest: String
    package var label: String?
    package var created: Int64?
    package var notes: String?
    package var mandatory = false
    package var minAppVersion: String?
    package var maxAppVersion: String?
    /// A format-2 release: its index's root page (its pages stay in the page store while the
    /// release is installed, and its chunked files' chunks can be reused).
    package var indexRoot: PageRef?
    /// The roots of its index's trees: the main one, and the linked one (`LinkedIndex`) when
    /// files' chunks share history.
    var indexRoots: [PageRef] { [indexRoot, index?.linked?.root].compactMap { $0 } }
    /// The channel it came from (nil: the default channel).
    package var channel: String?
    /// Its manifest's rollout share when it was installed, in basis points (nil: no rollout).
    package var rolloutBasisPoints: Int32?
    /// The release's groups (`files[i].group` numbers them from 1; 0 is the base). Files of
    /// on-demand groups lie in `groups/<name>/` beside `files/`, when the group is on disk.
    package var groups: [ReleaseGroup] = []
    /// Format 2: where its archive and index are (the signed head's, the URL resolved), so that
    /// a group can be fetched later from the release's own archive.
    package var archiveURL: String?
    package var archiveSize: UInt64?
    package var index: IndexLocation?
    /// Files of on-demand groups the update did not install whose bundle copy has their sha256
    /// (relative path, sha256): the bundle serves them while their group is absent. Kept in the
    /// release's `bundle-copies` file, not in release.json (an open reads it without the record).
    package var bundleCopies: [(path: String, sha256: String)] = []
    /// What fetching each on-demand group the update left absent would transfer, as it planned
    /// it (by name). Kept in the release's `group-fetch` file, read at an open.
    package var groupFetchBytes: [String: UInt64] = [:]

    /// The record's text, exactly as `toJSON().serialized()`, handed to `sink` in pieces of
    /// about `pieceSize` bytes, without building a value per file first: for a 1,000-file
    /// release, the tree and the whole text were 400 KB at the install, the update's peak. The
    /// files are written as bytes (a path needing no escape copied, the digest's hex digits
    /// from its words, numbers as small strings, which are not allocated): at 100,000 files, a
    /// String per digest was most of a tenth of an update's time.
    func serialize(pieceSize: Int = 64 << 10, _ sink: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        guard case let .object(pairs) = toJSON(listingFiles: false) else { return }
        var out: [UInt8] = []
        out.reserveCapacity(pieceSize + 4096)
        func flush(_ last: Bool) throws {
            if last || out.count >= pieceSize {
                try out.withUnsafeBytes { try sink($0) }
                out.removeAll(keepingCapacity: true)
            }
        }
        out.append(UInt8(ascii: "{"))
        for (i, (key, value)) in pairs.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSON.quote(key, into: &out)
            out.append(UInt8(ascii: ":"))
            guard key == "files" else {
                out += value.serialized().utf8
                continue
            }
            out.append(UInt8(ascii: "["))
            for (j, f) in files.enumerated() {
                if j > 0 { out.append(UInt8(ascii: ",")) }
                out += #"{"path":"#.utf8
                JSON.quote(f.path, into: &out)
                out += #","size":"#.utf8
                out += String(f.size).utf8
                out += #","sha256":""#.utf8
                f.digest.appendHex(to: &out)
                out.append(0x22)
                if f.group != 0 {
                    out += #","group":"#.utf8
                    out += String(f.group).utf8
                }
                out.append(UInt8(ascii: "}"))
                try flush(false)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
        try flush(true)
    }

    /// `listingFiles: false`: "files" is an empty array (`serialized` writes the files itself).
    func toJSON(listingFiles: Bool = true) -> JSON {
        var pairs: [(String, JSON)] = [
            ("format", .int(1)),
            ("version", .int(version)),
            ("label", label.map { .string($0) } ?? .null),
            ("created", created.map { .int($0) } ?? .null),
            ("notes", notes.map { .string($0) } ?? .null),
            ("mandatory", .bool(mandatory)),
            ("min_app_version", minAppVersion.map { .string($0) } ?? .null),
            ("max_app_version", maxAppVersion.map { .string($0) } ?? .null),
            ("archive_digest", .string(archiveDigest)),
            ("signature_verified", .bool(signatureVerified)),
            ("files", .array(!listingFiles ? [] : files.map { .object([("path", .string($0.path)), ("size", .int(Int64($0.size))), ("sha256", .string($0.sha256))]) })),
            ("plugins", .array(plugins.map { $0.toJSON() })),
        ]
        if let channel { pairs.append(("channel", .string(channel))) }
        if let rolloutBasisPoints { pairs.append(("rollout_basis_points", .int(Int64(rolloutBasisPoints)))) }
        if !groups.isEmpty {
            pairs.append(("groups", .array(groups.map { g in
                .object([("name", .string(g.name)), ("delivery", .string(g.delivery.name)), ("files", .int(Int64(g.files))),
                         ("size", .int(Int64(g.size))), ("stored", .int(Int64(g.storedBytes)))])
            })))
        }
        if let archiveURL, let archiveSize, let index {
            pairs += [("archive_url", .string(archiveURL)), ("archive_size", .int(Int64(archiveSize))), ("index", index.toJSON())]
        }
        if let indexRoot {
            pairs.append(("index_root", .object([("sha256", .string(indexRoot.hex)), ("size", .int(Int64(indexRoot.compressedSize)))])))
        }
        return .object(pairs)
    }

    /// Reads a record's text. Its files are decoded one at a time as the parser reaches them
    /// (never a tree of 100,000 small objects), and only when `listingFiles`: callers that need
    /// the record's other fields (its trust, its index roots) skip building the list. Nil when
    /// the text is not a record this version can read.
    static func decode(_ bytes: [UInt8], listingFiles: Bool = true) -> ReleaseRecord? {
        try? decode(listingFiles: listingFiles) { files in
            guard let files else { return try JSONParser.parse(bytes, streaming: "files", element: nil) }
            return try JSONParser.parse(bytes, streamingTextOf: "files", reader: files.reader, element: files.element)
        }
    }

    /// Reads a record's text from `source` as it is parsed (`JSONParser.parse(reading:...)`):
    /// the text is never in memory whole. Nil when it is not a record this version can read;
    /// what `source` throws is passed on.
    /// With `eachFile`, the files are handed to it as they are read instead of listed in the
    /// record (files of a record that turns out bad included: the caller drops them on nil).
    static func decode(reading source: @escaping (UnsafeMutableRawBufferPointer) throws -> Int, listingFiles: Bool = true,
                       eachFile: ((ManifestFile) -> Void)? = nil) throws -> ReleaseRecord? {
        try decode(listingFiles: listingFiles, eachFile: eachFile) { files in
            guard let files else { return try JSONParser.parse(reading: source, streaming: "files", element: nil) }
            return try JSONParser.parse(reading: source, streamingTextOf: "files", reader: files.reader, element: files.element)
        }
    }

    /// How the elements of a record's files are read (`JSONParser.parse(...streamingTextOf:...)`).
    private typealias FileReaders = (reader: (UnsafeRawBufferPointer) -> Int, element: (UnsafeRawBufferPointer) -> Void)

    /// `parse` parses the record, each element of its files read by the readers it is given
    /// (nil: checked, not read).
    private static func decode(listingFiles: Bool, eachFile: ((ManifestFile) -> Void)? = nil,
                               parse: (FileReaders?) throws -> JSON) throws -> ReleaseRecord? {
        var files: [ManifestFile] = []
        var malformed = false
        var highestGroup: UInt16 = 0
        func take(_ file: ManifestFile?) {
            guard !malformed else { return }
            guard let file, ResourceName.isValid(file.path) else {
                malformed = true
                return
            }
            highestGroup = max(highestGroup, file.group)
            if let eachFile { eachFile(file) } else { files.append(file) }
        }
        // The form `serialize` writes, read as it is, in one pass; any other, checked and read
        // as JSON.
        let readers: FileReaders = (reader: { text in
            guard let (file, length) = RecordedFile.read(prefixOf: text) else { return 0 }
            take(file)
            return length
        }, element: { text in
            take(RecordedFile.read(text) ?? (try? JSONParser.parse(Array(text))).flatMap(RecordedFile.read))
        })
        let json: JSON
        do { json = try parse(listingFiles || eachFile != nil ? readers : nil) } catch is JSONParser.Failure { return nil }
        guard !malformed, json["format"]?.int64 == 1, let version = json["version"]?.int64, let digest = json["archive_digest"]?.string,
              json["files"]?.array != nil else { return nil }
        var info = ReleaseRecord(version: version, files: files, plugins: [], signatureVerified: json["signature_verified"] == .bool(true),
                                 archiveDigest: digest, label: json["label"]?.string)
        info.created = json["created"]?.int64
        if let r = json["index_root"], let hex = r["sha256"]?.string, let sha = Hex.decode(hex), sha.count == 32,
           let size = r["size"]?.int64, size > 0, size <= Int64(IndexPage.maxBytes) {
            info.indexRoot = PageRef(sha256: sha, compressedSize: UInt32(size))
        }
        info.channel = json["channel"]?.string.flatMap { Channel.isValid($0) ? $0 : nil }
        info.rolloutBasisPoints = json["rollout_basis_points"]?.int64.flatMap { (0...10000).contains($0) ? Int32($0) : nil }
        info.notes = json["notes"]?.string
        info.mandatory = json["mandatory"] == .bool(true)
        info.minAppVersion = json["min_app_version"]?.string
        info.maxAppVersion = json["max_app_version"]?.string
        for g in json["groups"]?.array ?? [] {
            guard let name = g["name"]?.string, ReleaseGroup.isValidName(name), let d = g["delivery"]?.string.flatMap(ReleaseGroup.Delivery.init(name:)),
                  let n = g["files"]?.int64, let size = g["size"]?.int64, let stored = g["stored"]?.int64, n >= 0, size >= 0, stored >= 0 else { return nil }
            info.groups.append(ReleaseGroup(name: name, delivery: d, files: Int(n), size: UInt64(size), storedBytes: UInt64(stored)))
        }
        guard info.groups.count <= ReleaseGroup.maxCount, Int(highestGroup) <= info.groups.count else { return nil }
        if let url = json["archive_url"]?.string, let size = json["archive_size"]?.int64, size >= 0,
           let index = try? IndexLocation.decode(json["index"], archiveSize: UInt64(size), source: "release record") {
            (info.archiveURL, info.archiveSize, info.index) = (url, UInt64(size), index)
        }
        for p in json["plugins"]?.array ?? [] {
            guard let decl = PluginDeclaration.from(p) else { return nil }
            info.plugins.append(decl)
        }
        return info
    }
}

extension ReleaseRecord {
    /// The on-demand group file `f` is in, nil for the base and install groups (under `files/`).
    func onDemandGroup(of f: ManifestFile) -> ReleaseGroup? {
        guard f.group > 0 else { return nil }
        let g = groups[Int(f.group) - 1]
        return g.delivery == .onDemand ? g : nil
    }

    /// Where file `f` lies in the release directory: `files/<path>`, or `groups/<name>/<path>`
    /// for a file of an on-demand group.
    func relativePath(of f: ManifestFile) -> String {
        ReleaseRecord.directory(of: onDemandGroup(of: f)) + f.path
    }

    /// Where files of each group number lie under the release directory `dir` (ending in "/"):
    /// one String for all the files of a group (`relativePath(of:)` makes one per file).
    func roots(in dir: String) -> [String] {
        [dir + ReleaseRecord.directory(of: nil)] + groups.map { dir + ReleaseRecord.directory(of: $0.delivery == .onDemand ? $0 : nil) }
    }

    /// `groups/<name>/` for a file of on-demand group `g`, `files/` for the others.
    private static func directory(of g: ReleaseGroup?) -> String { g.map { "groups/\($0.name)/" } ?? "files/" }

    /// Whether `f` is on disk when the on-demand groups `local` are.
    func isPresent(_ f: ManifestFile, local: [String]) -> Bool {
        isPresent(group: f.group, local: local)
    }

    /// Whether the files of group number `group` are on disk when the on-demand groups `local` are.
    func isPresent(group: UInt16, local: [String]) -> Bool {
        guard group > 0, Int(group) <= groups.count, case let g = groups[Int(group) - 1], g.delivery == .onDemand else { return true }
        return local.contains(g.name)
    }

    /// The group table, as the release's `group-table` file holds it.
    var groupTable: GroupTable? {
        groups.isEmpty ? nil : GroupTable(groups: groups, fileGroups: files.map(\.group))
    }
}
