/// A decoded, validated release manifest: format 1, a format-2 head (its files come from the
/// release index, `Manifest/Head.swift`), or the seed's legacy `{url, md5}`.
package struct Manifest: Sendable {
    package enum Kind: Sendable { case format1, format2, legacy }

    package var kind: Kind
    package var package: String?
    /// Format 1: the publisher's version. Legacy: 0 (the store numbers legacy releases).
    package var version: Int64
    package var label: String?
    package var created: Int64?
    package var expires: Int64?
    package var minAppVersion: String?
    /// The newest app version the release is built for (optional): a newer app refuses it and
    /// stops serving it.
    package var maxAppVersion: String?
    /// What's new, for people (optional, at most 64 KiB of UTF-8).
    package var notes: String?
    /// The publisher asks apps to install this release before going on (the app decides).
    package var mandatory = false
    /// The repository's root on other hosts (absolute http(s) URLs ending in "/"), as the
    /// publisher lists them.
    package var mirrors: [String] = []
    /// The archive URL as written in the manifest (may be relative).
    package var archiveURL: String
    /// Format 1: the channel's head (`head.json`) as written (relative to the manifest, or
    /// absolute); a client given this manifest reads the head instead from then on.
    package var headURL: String?
    package var archiveSize: UInt64?
    /// sha256 (format 1) or md5 (legacy) of the archive, lowercase hex.
    package var archiveDigest: String
    package var files: [ManifestFile]
    package var plugins: [PluginDeclaration]
    /// True when a trusted key's signature over the payload was checked.
    package var signatureVerified: Bool
    /// The manifest bytes (an envelope's decoded payload), for showing a manifest as signed.
    /// An update drops them once decoded.
    package var payload: [UInt8]
    /// Format 2: where the release index lies and its root page.
    package var index: IndexLocation?
    /// The channel that offers the release (nil: the default channel, `Channel.defaultName`).
    package var channel: String?
    /// The share of clients the release is offered to (nil: all).
    package var rollout: Rollout?
    /// The key document the signatures are made under, and where the documents are.
    package var keys: KeyDocumentRef?
    /// How often the channel was signed (see `ManifestOrder`); 0 when the manifest does not say.
    package var revision: Int64 = 0
    /// When the channel was last signed (optional, for people).
    package var signed: Int64?
    /// The trusted keys whose signatures were valid (empty when nothing was verified).
    package var signers: [[UInt8]] = []
    /// What the release is, apart from how its channel signed it (`contentDigest`); "" for a
    /// legacy manifest.
    package var contentDigest = ""

    /// The channel, the default one when the manifest names none.
    package var channelName: String { channel ?? Channel.defaultName }

    package var isLegacy: Bool { kind == .legacy }

    package init(kind: Kind, package: String?, version: Int64, label: String?, created: Int64?, expires: Int64?,
                minAppVersion: String?, archiveURL: String, archiveSize: UInt64?, archiveDigest: String,
                files: [ManifestFile], plugins: [PluginDeclaration], signatureVerified: Bool, payload: [UInt8]) {
        self.kind = kind
        self.package = package
        self.version = version
        self.label = label
        self.created = created
        self.expires = expires
        self.minAppVersion = minAppVersion
        self.archiveURL = archiveURL
        self.archiveSize = archiveSize
        self.archiveDigest = archiveDigest
        self.files = files
        self.plugins = plugins
        self.signatureVerified = signatureVerified
        self.payload = payload
    }

    package var digestAlgorithm: Digest.Algorithm { kind == .legacy ? .md5 : .sha256 }

    /// The total unpacked size (the sum of `files[].size`).
    package var releaseBytes: UInt64 { files.reduce(0) { $0 &+ $1.size } }

    /// Whether every file's zip location is given (format 1 with files): what fetching files by
    /// ranges, and extracting them while the archive arrives, need.
    var locatesEveryFile: Bool { !isLegacy && !files.isEmpty && files.allSatisfy { $0.location != nil } }

    static func fail(_ what: String) -> AssetPatchError { AssetPatchError(.manifest, what) }

    /// Decodes manifest or envelope bytes. With `trustedKeys` non-empty only an envelope with a
    /// valid signature by one of them is accepted (`ERR_SIGNATURE` otherwise). `source` names
    /// the manifest in messages.
    package static func decode(_ bytes: [UInt8], trustedKeys: [[UInt8]] = [], source: String = "manifest") throws -> Manifest {
        try decode(bytes, source: source) { _ in trustedKeys.isEmpty ? nil : KeySet(keys: trustedKeys, threshold: 1) }
    }

    /// Decodes manifest or envelope bytes, asking `signingKeys` which keys must sign (given the
    /// key document the manifest names, if it names one): nil accepts an unsigned manifest;
    /// otherwise only an envelope signed by a threshold of them is (`ERR_SIGNATURE`). `verifies`:
    /// the caller will need a signature, so an envelope that cannot carry one is refused before
    /// `signingKeys` is asked (which may fetch key documents).
    package static func decode(_ bytes: [UInt8], source: String, verifies: Bool = false,
                               signingKeys: (KeyDocumentRef?) throws -> KeySet?) throws -> Manifest {
        let json: JSON
        do { json = try JSONParser.parse(bytes) } catch {
            let start = bytes.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0xEF || $0 == 0xBB || $0 == 0xBF }
            let html = start.first == UInt8(ascii: "<")
                ? " (the body looks like HTML: an error page, a login or captive-portal page, or a URL that names a directory)" : ""
            throw fail("\(source): not valid JSON: \(JSONParser.describe(error))\(html)")
        }
        guard json.isObject else { throw fail("\(source): not a JSON object") }

        if json["payload"] != nil || json["payloadType"] != nil || json["signatures"] != nil {
            guard let type = json["payloadType"]?.string, let payloadText = json["payload"]?.string else {
                throw fail("\(source): envelope needs string fields payloadType and payload")
            }
            guard let payload = Base64.decode(payloadText) else { throw fail("\(source): envelope payload is not base64") }
            let inner: JSON
            do { inner = try JSONParser.parse(payload) } catch {
                // A payload that is not JSON was not signed as it is: say so when signatures count.
                if let keys = try signingKeys(nil) { try checkSignatures(json, type: type, payload: payload, keys: keys, source: source) }
                throw fail("\(source): envelope payload is not valid JSON: \(JSONParser.describe(error))")
            }
            // The key document a manifest names is read before its signature is checked: it
            // only says which document to judge by, and a document is trusted only by its chain.
            let ref = try inner["keys"].flatMap { $0 == .null ? nil : try KeyDocumentRef.decode($0, source: source) }
            // What can be checked without keys is checked before the chain of key documents
            // is followed: a forged envelope must not make the client fetch anything.
            if verifies { try checkShape(json, type: type, source: source) }
            var signers: [[UInt8]] = []
            if let keys = try signingKeys(ref) {
                signers = try checkSignatures(json, type: type, payload: payload, keys: keys, source: source)
            }
            var m = try decodeFormat1(inner, source: source)
            m.payload = payload
            m.signatureVerified = !signers.isEmpty
            m.signers = signers
            m.contentDigest = contentDigest(inner)
            return m
        }
        if try verifies || signingKeys(nil) != nil {
            throw AssetPatchError(.signature, "\(source): manifest is not signed, but public_keys are set")
        }
        if json["format"] == nil, json["url"] != nil || json["md5"] != nil {
            return try decodeLegacy(json, bytes: bytes, source: source)
        }
        var m = try decodeFormat1(json, source: source)
        m.payload = bytes
        m.contentDigest = contentDigest(json)
        return m
    }

    /// What an envelope that carries a signature looks like: the manifest payload type, and at
    /// least one signature of an Ed25519 signature's length.
    static func checkShape(_ json: JSON, type: String, source: String) throws {
        guard type == DSSE.payloadType else {
            throw AssetPatchError(.signature, "\(source): envelope payloadType is \"\(type)\", expected \"\(DSSE.payloadType)\"")
        }
        guard let signatures = json["signatures"]?.array, !signatures.isEmpty else {
            throw AssetPatchError(.signature, "\(source): envelope has no signatures")
        }
        guard signatures.prefix(32).contains(where: { $0["sig"]?.string.flatMap(Base64.decode)?.count == Ed25519.signatureLength }) else {
            throw AssetPatchError(.signature, "\(source): envelope has no signature of an Ed25519 signature's length")
        }
    }

    /// An envelope's signatures must include a threshold of `keys` (distinct keys): returns the
    /// keys whose signatures are valid.
    @discardableResult
    static func checkSignatures(_ json: JSON, type: String, payload: [UInt8], keys: KeySet, source: String) throws -> [[UInt8]] {
        try checkShape(json, type: type, source: source)
        let found = keys.signers(payloadType: type, payload: payload, signatures: json["signatures"]?.array ?? [])
        let valid = found.count
        guard valid >= keys.threshold else {
            if keys.threshold == 1 { throw AssetPatchError(.signature, "\(source): no valid signature by a trusted key") }
            throw AssetPatchError(.signature, "\(source): \(valid) valid signature\(valid == 1 ? "" : "s") by distinct trusted keys; \(keys.threshold) needed")
        }
        return found.sorted().map { keys.keys[$0] }
    }

    static func decodeLegacy(_ json: JSON, bytes: [UInt8], source: String) throws -> Manifest {
        guard let url = json["url"]?.string, !url.isEmpty else { throw fail("\(source): legacy manifest needs a string \"url\"") }
        guard let md5 = json["md5"]?.string, Hex.isHex(md5, length: 32) else {
            throw fail("\(source): legacy manifest needs \"md5\" as 32 hex digits")
        }
        return Manifest(kind: .legacy, package: nil, version: 0, label: nil, created: nil, expires: nil,
                        minAppVersion: nil, archiveURL: url, archiveSize: nil, archiveDigest: md5.lowercased(),
                        files: [], plugins: [], signatureVerified: false, payload: bytes)
    }

    static func decodeFormat1(_ json: JSON, source: String) throws -> Manifest {
        guard json.isObject else { throw fail("\(source): manifest is not a JSON object") }
        guard let formatValue = json["format"] else { throw fail("\(source): missing field \"format\"") }
        guard let format = formatValue.int64 else { throw fail("\(source): \"format\" must be an integer") }
        guard format == 1 || format == 2 else { throw fail("\(source): unsupported manifest format \(format) (this library reads formats 1 and 2)") }

        func string(_ key: String, required: Bool) throws -> String? {
            guard let v = json[key] else {
                if required { throw fail("\(source): missing field \"\(key)\"") }
                return nil
            }
            if case .null = v, !required { return nil }
            guard let s = v.string else { throw fail("\(source): \"\(key)\" must be a string") }
            return s
        }
        func size(_ v: JSON?, _ what: String) throws -> UInt64 {
            guard let v else { throw fail("\(source): missing \(what)") }
            guard let n = v.int64 else { throw fail("\(source): \(what) must be an integer") }
            guard n >= 0 else { throw fail("\(source): \(what) is negative") }
            return UInt64(n)
        }
        func sha(_ v: JSON?, _ what: String) throws -> String {
            guard let s = v?.string, Hex.isHex(s, length: 64) else { throw fail("\(source): \(what) must be 64 hex digits") }
            return s.lowercased()
        }

        let package = try string("package", required: true)!
        guard PackageName.isValid(package) else {
            throw fail("\(source): \"package\" must be a non-empty name")
        }
        guard let versionValue = json["version"] else { throw fail("\(source): missing field \"version\"") }
        guard let version = versionValue.int64 else { throw fail("\(source): \"version\" must be an integer") }
        guard version >= 1 else { throw fail("\(source): \"version\" must be >= 1") }

        let label = try string("label", required: false)
        var created: Int64?
        if let text = try string("created", required: false) {
            guard let t = RFC3339.parse(text) else { throw fail("\(source): \"created\" is not an RFC 3339 time: \(text)") }
            created = t
        }
        var expires: Int64?
        if let text = try string("expires", required: false) {
            guard let t = RFC3339.parse(text) else { throw fail("\(source): \"expires\" is not an RFC 3339 time: \(text)") }
            expires = t
        }
        let notes = try string("notes", required: false)
        if let notes, notes.utf8.count > 65536 { throw fail("\(source): \"notes\" is longer than 65536 bytes") }
        var mandatory = false
        if let m = json["mandatory"], m != .null {
            guard case let .bool(b) = m else { throw fail("\(source): \"mandatory\" must be true or false") }
            mandatory = b
        }
        var mirrors: [String] = []
        if let list = json["mirrors"], list != .null {
            // The repository on other hosts (its root, ending in "/"), which the publisher vouches
            // for by signing it: valid for every channel, whichever channel's head carries it.
            guard let items = list.array, items.count <= 16 else { throw fail("\(source): \"mirrors\" must be a list of at most 16 URLs") }
            for item in items {
                guard let url = item.string, url.utf8.count <= 2048, !url.hasLineBreak, url.hasSuffix("/"),
                      [.http, .https].contains(URLs.scheme(url)), !url.contains("?"), !url.contains("#") else {
                    throw fail("\(source): \"mirrors\" lists something other than an http(s) URL of a repository's root (ending in \"/\")")
                }
                mirrors.append(url)
            }
        }
        let minApp = try string("min_app_version", required: false)
        if let minApp, AppVersion.parse(minApp) == nil {
            throw fail("\(source): \"min_app_version\" is not a dotted version: \(minApp)")
        }
        let maxApp = try string("max_app_version", required: false)
        if let maxApp, AppVersion.parse(maxApp) == nil {
            throw fail("\(source): \"max_app_version\" is not a dotted version: \(maxApp)")
        }

        let channel = try string("channel", required: false)
        if let channel, !Channel.isValid(channel) {
            throw fail("\(source): \"channel\" must be 1 to 63 letters, digits, '.', '_' or '-'")
        }
        let rollout = try json["rollout"].flatMap { $0 == .null ? nil : try Rollout.decode($0, source: source) }
        let keys = try json["keys"].flatMap { $0 == .null ? nil : try KeyDocumentRef.decode($0, source: source) }
        let signing = try decodeSigning(json, source: source)
        let headURL = try string("head", required: false)
        if let headURL {
            guard NamedHead.isReference(headURL) else {
                throw fail("\(source): \"head\" must be the URL of the channel's head.json")
            }
        }

        guard let archive = json["archive"] else { throw fail("\(source): missing field \"archive\"") }
        guard archive.isObject else { throw fail("\(source): \"archive\" must be an object") }
        guard let archiveURL = archive["url"]?.string, !archiveURL.isEmpty else {
            throw fail("\(source): archive.url must be a non-empty string")
        }
        let archiveSize = try size(archive["size"], "archive.size")
        let archiveSHA = try sha(archive["sha256"], "archive.sha256")

        if format == 2 {
            var m = Manifest(kind: .format2, package: package, version: version, label: label, created: created,
                             expires: expires, minAppVersion: minApp, archiveURL: archiveURL, archiveSize: archiveSize,
                             archiveDigest: archiveSHA, files: [], plugins: try decodePlugins(json, files: nil, source: source),
                             signatureVerified: false, payload: [])
            m.index = try IndexLocation.decode(json["index"], archiveSize: archiveSize, source: source)
            m.notes = notes
            m.mandatory = mandatory
            m.mirrors = mirrors
            m.maxAppVersion = maxApp
            (m.channel, m.rollout, m.keys) = (channel, rollout, keys)
            (m.revision, m.signed) = signing
            return m
        }

        guard let filesValue = json["files"] else { throw fail("\(source): missing field \"files\"") }
        guard let fileItems = filesValue.array else { throw fail("\(source): \"files\" must be an array") }
        var files: [ManifestFile] = []
        files.reserveCapacity(fileItems.count)
        var seen = Set<String>()
        var total: UInt64 = 0
        for (i, item) in fileItems.enumerated() {
            guard item.isObject else { throw fail("\(source): files[\(i)] must be an object") }
            guard let path = item["path"]?.string else { throw fail("\(source): files[\(i)].path must be a string") }
            guard ResourceName.isValid(path) else { throw fail("\(source): files[\(i)].path is not a safe relative path: \"\(path)\"") }
            guard seen.insert(path).inserted else { throw fail("\(source): duplicate path in files: \"\(path)\"") }
            let s = try size(item["size"], "files[\(i)].size")
            let (sum, overflow) = total.addingReportingOverflow(s)
            if overflow { throw fail("\(source): total size of files overflows") }
            total = sum
            var location: ArchiveLocation?
            if let z = item["zip"], z != .null {
                location = try decodeLocation(z, path: path, size: s, index: i, archiveSize: archiveSize, source: source)
            }
            files.append(ManifestFile(path: path, size: s, sha256: try sha(item["sha256"], "files[\(i)].sha256"), location: location))
        }
        // A publisher of format 2 lists its release index as a file, for clients before 0.4;
        // it is not a resource (docs/format.md).
        files.removeAll { $0.path == IndexLocation.entryName }
        seen.remove(IndexLocation.entryName)
        try checkLocations(files, source: source)
        // A file "a" and a file "a/b" can't both exist on disk.
        if let conflict = ResourceName.fileDirectoryConflict(in: seen) {
            throw fail("\(source): \"\(conflict)\" is both a file and a directory")
        }

        let plugins = try decodePlugins(json, files: seen, source: source)

        var m = Manifest(kind: .format1, package: package, version: version, label: label, created: created,
                         expires: expires, minAppVersion: minApp, archiveURL: archiveURL, archiveSize: archiveSize,
                         archiveDigest: archiveSHA, files: files, plugins: plugins, signatureVerified: false, payload: [])
        m.notes = notes
        m.mandatory = mandatory
        m.mirrors = mirrors
        m.maxAppVersion = maxApp
        m.headURL = headURL
        (m.channel, m.rollout, m.keys) = (channel, rollout, keys)
        (m.revision, m.signed) = signing
        return m
    }

    /// `plugins`: each declared once, its path among `files` (format 2: checked when the index
    /// gives the files).
    static func decodePlugins(_ json: JSON, files seen: Set<String>?, source: String) throws -> [PluginDeclaration] {
        var plugins: [PluginDeclaration] = []
        guard let pv = json["plugins"], pv != .null else { return [] }
        guard let items = pv.array else { throw fail("\(source): \"plugins\" must be an array") }
        var names = Set<String>()
        for (i, item) in items.enumerated() {
            guard let p = PluginDeclaration.from(item) else {
                throw fail("\(source): plugins[\(i)] needs string fields name and entry (1 to 127 bytes) and path, and optional version and abi (up to 63 bytes)")
            }
            if let seen, !seen.contains(p.path) { throw fail("\(source): plugins[\(i)].path \"\(p.path)\" is not in files") }
            guard names.insert(p.name).inserted else { throw fail("\(source): plugin \"\(p.name)\" is declared twice") }
            plugins.append(p)
        }
        return plugins
    }

    /// `files[i].zip`: where the file lies in the archive. The local header must fit before the
    /// data, the data inside the archive, a stored file's compressed size must be its size.
    static func decodeLocation(_ z: JSON, path: String, size: UInt64, index i: Int, archiveSize: UInt64,
                               source: String) throws -> ArchiveLocation {
        let what = "files[\(i)].zip (\"\(path)\")"
        guard z.isObject else { throw fail("\(source): \(what) must be an object") }
        func number(_ key: String) throws -> UInt64 {
            guard let n = z[key]?.int64 else { throw fail("\(source): \(what).\(key) must be an integer") }
            guard n >= 0 else { throw fail("\(source): \(what).\(key) is negative") }
            return UInt64(n)
        }
        let header = try number("header_offset"), data = try number("data_offset")
        let compressed = try number("compressed_size"), method = try number("method")
        guard method == 0 || method == 8 else { throw fail("\(source): \(what).method \(method) is neither 0 (stored) nor 8 (deflate)") }
        let nameLength = UInt64(path.utf8.count)
        guard header <= archiveSize, data >= header + 30 + nameLength, data <= archiveSize, compressed <= archiveSize - data else {
            throw fail("\(source): \(what) lies outside the archive of \(archiveSize) bytes or leaves no room for the local header")
        }
        if method == 0 && compressed != size { throw fail("\(source): \(what) is stored but its compressed size is not its size") }
        return ArchiveLocation(headerOffset: header, dataOffset: data, compressedSize: compressed, method: UInt16(method))
    }

    /// Locations are all or nothing, and no two files' bytes overlap.
    static func checkLocations(_ files: [ManifestFile], source: String) throws {
        guard files.contains(where: { $0.location != nil }) else { return }
        // Each span with its file's number, sized once: 24 bytes a file (with a path and grown
        // by doubling, 6 MB at 100,000 files while an update's index was read).
        var spans: [(range: Range<UInt64>, file: Int)] = []
        spans.reserveCapacity(files.count)
        for (i, f) in files.enumerated() {
            guard let l = f.location else { throw fail("\(source): \"\(f.path)\" has no zip location while other files have one") }
            spans.append((l.range, i))
        }
        spans.sort { $0.range.lowerBound < $1.range.lowerBound }
        for k in 1..<max(1, spans.count) where spans[k - 1].range.upperBound > spans[k].range.lowerBound {
            throw fail("\(source): the zip locations of \"\(files[spans[k - 1].file].path)\" and \"\(files[spans[k].file].path)\" overlap")
        }
    }

    /// The manifest as JSON (the form `publish` writes and `inspect --json` prints): a format-2
    /// head (index, no files) when `index` is set, format 1 otherwise.
    package func toJSON() -> JSON {
        var pairs: [(String, JSON)] = [("format", .int(index == nil ? 1 : 2)), ("package", .string(package ?? "default")), ("version", .int(version))]
        if let label { pairs.append(("label", .string(label))) }
        if let created { pairs.append(("created", .string(RFC3339.format(created)))) }
        if let expires { pairs.append(("expires", .string(RFC3339.format(expires)))) }
        if let minAppVersion { pairs.append(("min_app_version", .string(minAppVersion))) }
        if let maxAppVersion { pairs.append(("max_app_version", .string(maxAppVersion))) }
        if let notes { pairs.append(("notes", .string(notes))) }
        if mandatory { pairs.append(("mandatory", .bool(true))) }
        if !mirrors.isEmpty { pairs.append(("mirrors", .array(mirrors.map { .string($0) }))) }
        if let channel { pairs.append(("channel", .string(channel))) }
        if let rollout { pairs.append(("rollout", rollout.toJSON())) }
        if let keys { pairs.append(("keys", keys.toJSON())) }
        if revision > 0 { pairs.append(("revision", .int(revision))) }
        if let signed { pairs.append(("signed", .string(RFC3339.format(signed)))) }
        if index == nil, let headURL { pairs.append(("head", .string(headURL))) }
        pairs.append(("archive", .object([("url", .string(archiveURL)), ("size", .int(Int64(archiveSize ?? 0))), ("sha256", .string(archiveDigest))])))
        if let index { pairs.append(("index", index.toJSON())) } else { pairs.append(("files", .array(files.map { $0.toJSON() }))) }
        if !plugins.isEmpty {
            pairs.append(("plugins", .array(plugins.map { $0.toJSON() })))
        }
        return .object(pairs)
    }
}
