/// When a newly installed release starts being served.
package enum ApplyMode: Sendable { case immediate, nextOpen }

/// A client's options (`assetpatch_client_set`), parsed and validated.
package struct ClientConfig: Sendable {
    package var manifest: Location?
    package var publicKeys: [[UInt8]] = []
    /// The package this host is; nil: the bundle marker's, else the first manifest's.
    package var package: String?
    package var appVersion: [UInt64]?
    package var variants: [String] = [""]
    package var apply: ApplyMode = .immediate
    package var keepVersions = 1
    /// Opens without mark_good after which an open rolls back (persisted in the state); 0 never.
    package var maxFailedLaunches = 0
    package var http = HTTPSettings()
    package var maxManifestBytes = 64 << 20
    package var maxReleaseBytes: UInt64 = 4 << 30
    /// A legacy manifest declares no sizes: this bounds its archive's download.
    package var maxLegacyArchiveBytes: UInt64 = 5 << 30
    /// Plugins of releases whose manifest was not signature-verified may load.
    package var allowUnsignedPlugins = false
    /// Key documents may come from another origin than the manifest's.
    package var allowCrossOriginKeys = false
    /// Concurrent range requests of a differential update.
    package var parallelDownloads = 4
    /// false: always download the whole archive.
    package var differential = true
    /// Ranges that would transfer more than this percentage of the archive: the whole archive.
    package var differentialMaxPercent = 90
    /// The channel this host follows: manifests of another channel are refused, and a move to
    /// it may install a lower version than the one installed from another channel.
    package var channel: String?
    /// Who this client is in staged rollouts; nil: the data directory's own random id.
    package var rolloutID: String?
    /// A key document the host pins (option `key_document`): the chain of key documents starts
    /// from it instead of from `public_keys`.
    package var keyDocument: KeyDocument?
    /// On-demand groups this host wants with every update (its language, its scale).
    package var groups: [String] = []
    /// The most the on-demand groups fetched into the active release may occupy (unpacked
    /// bytes); nil: no quota.
    package var groupQuotaBytes: UInt64?
    /// Bytes per second all transfers of the client share (`TransferControl`); 0: no cap.
    package var maxRecvSpeed: UInt64 = 0
    /// Foreground work holds background work's transfers on the data directory. Updates are
    /// background and group fetches foreground unless set otherwise.
    package var updateForeground = false
    package var fetchForeground = true
    /// The host says the network is metered: an update or fetch that plans more than
    /// `meteredMaxBytes` fails with `.metered` before moving a byte of the archive.
    package var metered = false
    package var meteredMaxBytes: UInt64 = 0
    /// The same head as `manifest_url` on other hosts, tried in order after it (`Sources`).
    package var mirrors: [Location] = []
    /// A source silent for this long has its work started on the next one too; 0: off.
    package var hedgeMs: UInt64 = 500
    /// The mirrors a verified head lists are tried after the host's own (`KeptMirrors`).
    package var headMirrors = true
    /// Append outcome events to the data directory's outbox (`events`), bounded at
    /// `eventsMaxBytes` (`events_max_bytes`).
    package var events = true
    package var eventsMaxBytes = EventOutbox.defaultMaxBytes

    /// Whether manifests must be signed.
    package var verifies: Bool { !publicKeys.isEmpty || keyDocument != nil }

    /// What the chain of key documents starts from: the pinned document, else the pinned keys.
    package var trustAnchor: KeyDocument? {
        keyDocument ?? (publicKeys.isEmpty ? nil : KeyDocument.pinned(publicKeys))
    }

    package init() {}

    static func number(_ option: String, _ value: String, _ range: ClosedRange<Int64>) throws -> Int64 {
        guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let n = Int64(value), range.contains(n) else {
            throw AssetPatchError(.argument, "option \(option): \"\(value)\" is not a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return n
    }

    /// The spellings every on/off option takes, whatever the case: "1", "true", "yes", "on"
    /// and "0", "false", "no", "off". Bindings send "1" and "0".
    static func boolean(_ option: String, _ value: String) throws -> Bool {
        switch value.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw AssetPatchError(.argument, "option \(option): \"\(value)\" is not one of 1, true, yes, on, 0, false, no, off")
        }
    }

    /// "foreground" (true) or "background".
    static func priority(_ option: String, _ value: String) throws -> Bool {
        switch value {
        case "foreground": return true
        case "background": return false
        default: throw AssetPatchError(.argument, "option \(option): \"\(value)\" is neither foreground nor background")
        }
    }

    /// Applies one option; unknown options and bad values are `ERR_ARGUMENT`.
    package mutating func set(_ option: String, _ value: String) throws {
        switch option {
        case "manifest_url":
            guard !value.isEmpty else { throw AssetPatchError(.argument, "option manifest_url: empty URL") }
            guard URLs.scheme(value) != nil else {
                throw AssetPatchError(.argument, "option manifest_url: \"\(URLs.redacted(value))\" is not an http://, https:// or file:// URL")
            }
            guard let location = Location(value) else {
                throw AssetPatchError(.argument, "option manifest_url: \"\(value)\" is not a local file:// URL")
            }
            manifest = location
        case "public_keys":
            var keys: [[UInt8]] = []
            for item in value.split(separator: ",") {
                let text = String(item).trimmingCharacters(in: " \t")
                if text.isEmpty { continue }
                guard let key = Base64.decode(text), key.count == Ed25519.keyLength else {
                    throw AssetPatchError(.argument, "option public_keys: \"\(text)\" is not a base64 Ed25519 public key (32 bytes)")
                }
                keys.append(key)
            }
            // Verification is off only when the option is never set: a value that names no key
            // (an empty string from a missing configuration entry) must not turn it off.
            guard !keys.isEmpty else { throw AssetPatchError(.argument, "option public_keys: \"\(value)\" names no key") }
            publicKeys = keys
        case "package":
            guard PackageName.isValid(value) else {
                throw AssetPatchError(.argument, "option package: \"\(value)\" is not a package name (1 to 256 bytes, no control characters)")
            }
            package = value
        case "app_version":
            if value.isEmpty { appVersion = nil; return }
            guard let v = AppVersion.parse(value) else { throw AssetPatchError(.argument, "option app_version: \"\(value)\" is not a dotted version") }
            appVersion = v
        case "variants":
            var items: [String] = []
            for item in value.split(separator: ",", omittingEmptySubsequences: false) {
                let s = String(item)
                guard !s.utf8.contains(where: { $0 == 0x2F || $0 == 0x5C || $0 == 0 }) && s.utf8.count <= 64 else {
                    throw AssetPatchError(.argument, "option variants: \"\(s)\" is not a valid suffix")
                }
                if !items.contains(s) { items.append(s) }
            }
            guard items.count <= 16 else { throw AssetPatchError(.argument, "option variants: more than 16 variants") }
            variants = items
        case "apply":
            switch value {
            case "immediate": apply = .immediate
            case "next_open": apply = .nextOpen
            default: throw AssetPatchError(.argument, "option apply: \"\(value)\" is neither immediate nor next_open")
            }
        case "keep_versions": keepVersions = Int(try ClientConfig.number(option, value, 0...1000))
        case "max_failed_launches": maxFailedLaunches = Int(try ClientConfig.number(option, value, 0...1000))
        case "connect_timeout_ms": http.connectTimeoutMs = Int(try ClientConfig.number(option, value, 1...3_600_000))
        case "stall_timeout_ms": http.stallTimeoutMs = Int(try ClientConfig.number(option, value, 1...3_600_000))
        case "low_speed_limit": http.lowSpeedLimit = Int(try ClientConfig.number(option, value, 0...(1 << 30)))
        case "low_speed_time_ms": http.lowSpeedTimeMs = Int(try ClientConfig.number(option, value, 1...3_600_000))
        case "max_manifest_bytes": maxManifestBytes = Int(try ClientConfig.number(option, value, 1...(1 << 30)))
        case "max_release_bytes": maxReleaseBytes = UInt64(try ClientConfig.number(option, value, 1...Int64.max))
        case "max_legacy_archive_bytes": maxLegacyArchiveBytes = UInt64(try ClientConfig.number(option, value, 1...Int64.max))
        case "parallel_downloads": parallelDownloads = Int(try ClientConfig.number(option, value, 1...16))
        case "differential":
            // "auto" is the documented spelling of on: ranges are used when they pay off.
            differential = value.lowercased() == "auto" ? true : try ClientConfig.boolean(option, value)
        case "allow_unsigned_plugins": allowUnsignedPlugins = try ClientConfig.boolean(option, value)
        case "allow_cross_origin_keys": allowCrossOriginKeys = try ClientConfig.boolean(option, value)
        case "differential_max_percent": differentialMaxPercent = Int(try ClientConfig.number(option, value, 1...100))
        case "tcp_quickack": http.quickAck = try ClientConfig.boolean(option, value)
        case "channel":
            if value.isEmpty { channel = nil; return }
            guard Channel.isValid(value) else {
                throw AssetPatchError(.argument, "option channel: \"\(value)\" is not a channel name (1 to 63 letters, digits, '.', '_' or '-')")
            }
            channel = value
        case "rollout_id":
            if value.isEmpty { rolloutID = nil; return }
            guard value.utf8.count <= 256, !value.hasLineBreak else {
                throw AssetPatchError(.argument, "option rollout_id: 1 to 256 bytes without line breaks")
            }
            rolloutID = value
        case "key_document":
            let doc = try KeyDocument.decode(try FS.readFile(value, limit: KeyDocument.maxBytes, limitStatus: .argument), source: value)
            do { try doc.verifySelf(source: value) } catch let e as AssetPatchError {
                throw AssetPatchError(.argument, "option key_document: \(e.message)")
            }
            keyDocument = doc
        case "groups":
            var names: [String] = []
            for item in value.split(separator: ",") {
                let name = String(item)
                guard ReleaseGroup.isValidName(name) else {
                    throw AssetPatchError(.argument, "option groups: \"\(name)\" is not a group name (1 to 63 letters, digits, '.', '_' or '-')")
                }
                if !names.contains(name) { names.append(name) }
            }
            groups = names
        case "group_quota_bytes":
            groupQuotaBytes = value.isEmpty || value == "0" ? nil : UInt64(try ClientConfig.number(option, value, 0...Int64.max))
        case "max_recv_speed": maxRecvSpeed = UInt64(try ClientConfig.number(option, value, 0...Int64.max))
        case "update_priority": updateForeground = try ClientConfig.priority(option, value)
        case "fetch_priority": fetchForeground = try ClientConfig.priority(option, value)
        case "metered": metered = try ClientConfig.boolean(option, value)
        case "metered_max_bytes": meteredMaxBytes = UInt64(try ClientConfig.number(option, value, 0...Int64.max))
        case "mirrors":
            var list: [Location] = []
            for item in value.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\n" }) {
                let url = String(item)
                guard let location = Location(url) else {
                    throw AssetPatchError(.argument, "option mirrors: \"\(URLs.redacted(url))\" is not an http://, https:// or local file:// URL")
                }
                if !list.contains(location) { list.append(location) }
            }
            guard list.count <= 16 else { throw AssetPatchError(.argument, "option mirrors: more than 16 mirrors") }
            mirrors = list
        case "hedge_ms": hedgeMs = UInt64(try ClientConfig.number(option, value, 0...600_000))
        case "head_mirrors": headMirrors = try ClientConfig.boolean(option, value)
        case "events": events = try ClientConfig.boolean(option, value)
        case "events_max_bytes": eventsMaxBytes = Int(try ClientConfig.number(option, value, 65536...(1 << 30)))
        case "ca_file":
            http.caFile = value.isEmpty ? nil : value
        case "header":
            if value.isEmpty { http.headers = []; return }
            guard let colon = value.firstIndex(of: ":"), colon != value.startIndex,
                  !value.hasLineBreak else {
                throw AssetPatchError(.argument, "option header: \"\(value)\" is not of the form \"Name: value\"")
            }
            http.headers.append(value)
        case "user_agent":
            guard !value.hasLineBreak else { throw AssetPatchError(.argument, "option user_agent: contains a line break") }
            http.userAgent = value
        default:
            throw AssetPatchError(.argument, "unknown option \"\(option)\"")
        }
    }
}

extension String {
    /// CR, LF or NUL anywhere, by byte ("\r\n" is a single Character, so `contains("\r")` misses it).
    package var hasLineBreak: Bool { utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 } }
}
