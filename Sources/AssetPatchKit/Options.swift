extension AssetPatchClient {
    /// A client's options, typed. A nil field leaves the option as it is (the default at open).
    ///
    /// Each field is one option of the C API (`assetpatch_client_set`, documented in
    /// `assetpatch.h`), applied through the same parser, so both APIs accept and refuse the same
    /// values.
    public struct Options: Sendable, Equatable {
        /// How an installed release starts being served.
        public enum ApplyMode: String, Sendable {
            /// At once, when ``AssetPatchClient/update(progress:)`` returns (the default).
            case immediate
            /// From the next open of a client on the data directory.
            case nextOpen = "next_open"
        }

        /// The release manifest: an `https://`, `http://` or `file://` URL. Required to update.
        public var manifestURL: String?
        /// Base64 Ed25519 public keys; when set, only manifests signed by one of them are accepted
        /// (an empty list is refused: verification is off only while this is never set).
        public var publicKeys: [String]?
        /// A key document the host pins (a path): trust starts from it instead of
        /// ``publicKeys``, and manifests are judged by the newest document its chain leads to.
        public var keyDocument: String?
        /// The release channel this host follows: manifests of another channel are refused, and
        /// naming another channel moves the client to it, up or down, at once (the data directory
        /// follows it from then on).
        public var channel: String?
        /// Who this client is in staged rollouts. Default: a random id kept in the data directory.
        public var rolloutID: String?
        /// The app's package: manifests of another package are refused. Without it, the bundle
        /// marker's, else the first manifest's.
        public var package: String?
        /// The app's dotted version (e.g. `"2.4.1"`): releases whose `min_app_version` and
        /// `max_app_version` exclude it are refused, and installed ones stop being served.
        public var appVersion: String?
        /// Suffixes tried in order before a name's extension, e.g. `["@3x", "@2x", ""]`; the
        /// empty one is the plain name. Default: the plain name only.
        public var variants: [String]?
        /// When an installed release is served. Default ``ApplyMode/immediate``.
        public var apply: ApplyMode?
        /// Earlier releases kept on disk for rollback. Default 1.
        public var keepVersions: Int?
        /// Opens of a release the app has not confirmed after which an open rolls it back; 0
        /// (the default) never. Persisted for the data directory.
        public var maxFailedLaunches: Int?
        /// Connection timeout in milliseconds. Default 10,000.
        public var connectTimeoutMs: Int?
        /// A transfer that moves no byte for this long (milliseconds) is aborted. Default 30,000.
        public var stallTimeoutMs: Int?
        /// A transfer receiving fewer bytes per second than this, averaged over each
        /// ``lowSpeedTimeMs``, is aborted. Default 1024; 0 turns it off.
        public var lowSpeedLimit: Int?
        /// The window of ``lowSpeedLimit``, in milliseconds. Default 60,000.
        public var lowSpeedTimeMs: Int?
        /// The largest manifest accepted, in bytes. Default 64 MiB.
        public var maxManifestBytes: Int?
        /// The largest unpacked release accepted, in bytes. Default 4 GiB.
        public var maxReleaseBytes: UInt64?
        /// The largest archive of a legacy `{url, md5}` manifest, in bytes. Default 5 GiB.
        public var maxLegacyArchiveBytes: UInt64?
        /// A PEM bundle for TLS verification (verification is never off).
        public var caFile: String?
        /// Extra request headers, `"Name: value"` each; replaces any set before.
        public var headers: [String]?
        /// The User-Agent. Default `assetpatch/VERSION`.
        public var userAgent: String?
        /// Concurrent range requests of a differential update, 1...16. Default 4.
        public var parallelDownloads: Int?
        /// Differential updates whenever they pay off (true, the default), or always the whole archive.
        public var differential: Bool?
        /// A differential update whose ranges would transfer more than this percentage of the
        /// archive downloads the whole archive instead, 1...100. Default 90.
        public var differentialMaxPercent: Int?
        /// Whether plugins of releases that were not signature-verified may load. Default false.
        public var allowUnsignedPlugins: Bool?
        /// Acknowledge each response head at once (Linux TCP_QUICKACK). Default true.
        public var tcpQuickAck: Bool?
        /// Whether key documents may come from another origin than the manifest's. Default false.
        public var allowCrossOriginKeys: Bool?
        /// On-demand groups this host wants with every update (its language, its scale).
        public var groups: [String]?
        /// The most the fetched on-demand groups may take on disk; 0: no quota.
        public var groupQuotaBytes: UInt64?
        /// Bytes per second all transfers of the client share; 0: no cap. Changeable while an
        /// update or fetch runs.
        public var maxRecvSpeed: UInt64?
        /// Whether updates and group fetches are foreground or background work: background
        /// transfers hold while foreground work runs on the data directory. Defaults:
        /// updates background, fetches foreground.
        public var updatePriority: TransferPriority?
        public var fetchPriority: TransferPriority?
        /// The network is metered: a transfer planning more than `meteredMaxBytes` throws
        /// ``AssetPatchError/Status/metered`` before moving archive bytes.
        public var metered: Bool?
        public var meteredMaxBytes: UInt64?
        /// The same head as `manifestURL` on other hosts, tried after it (docs/hosting.md).
        public var mirrors: [String]?
        /// A source silent for this long has its work started on the next one too (0: off).
        public var hedgeMs: Int?
        /// The mirrors a verified head lists are tried after ``mirrors`` (default on).
        public var headMirrors: Bool?
        /// Append outcome events to the data directory's outbox (default on), and its bound.
        public var events: Bool?
        public var eventsMaxBytes: Int?

        /// Options with the given fields set; everything else stays as it is.
        public init(manifestURL: String? = nil, publicKeys: [String]? = nil, package: String? = nil, appVersion: String? = nil,
                    variants: [String]? = nil, apply: ApplyMode? = nil, keepVersions: Int? = nil, maxFailedLaunches: Int? = nil,
                    connectTimeoutMs: Int? = nil, stallTimeoutMs: Int? = nil, lowSpeedLimit: Int? = nil, lowSpeedTimeMs: Int? = nil,
                    maxManifestBytes: Int? = nil, maxReleaseBytes: UInt64? = nil,
                    maxLegacyArchiveBytes: UInt64? = nil, caFile: String? = nil, headers: [String]? = nil, userAgent: String? = nil,
                    parallelDownloads: Int? = nil, differential: Bool? = nil, differentialMaxPercent: Int? = nil,
                    allowUnsignedPlugins: Bool? = nil, tcpQuickAck: Bool? = nil, keyDocument: String? = nil,
                    channel: String? = nil, rolloutID: String? = nil, allowCrossOriginKeys: Bool? = nil,
                    groups: [String]? = nil, groupQuotaBytes: UInt64? = nil, maxRecvSpeed: UInt64? = nil,
                    updatePriority: TransferPriority? = nil, fetchPriority: TransferPriority? = nil, metered: Bool? = nil,
                    meteredMaxBytes: UInt64? = nil, mirrors: [String]? = nil, hedgeMs: Int? = nil, headMirrors: Bool? = nil,
                    events: Bool? = nil, eventsMaxBytes: Int? = nil) {
            self.events = events
            self.eventsMaxBytes = eventsMaxBytes
            self.headMirrors = headMirrors
            self.mirrors = mirrors
            self.hedgeMs = hedgeMs
            self.maxRecvSpeed = maxRecvSpeed
            self.updatePriority = updatePriority
            self.fetchPriority = fetchPriority
            self.metered = metered
            self.meteredMaxBytes = meteredMaxBytes
            self.allowCrossOriginKeys = allowCrossOriginKeys
            self.groups = groups
            self.groupQuotaBytes = groupQuotaBytes
            self.keyDocument = keyDocument
            self.channel = channel
            self.rolloutID = rolloutID
            self.manifestURL = manifestURL
            self.publicKeys = publicKeys
            self.package = package
            self.appVersion = appVersion
            self.variants = variants
            self.apply = apply
            self.keepVersions = keepVersions
            self.maxFailedLaunches = maxFailedLaunches
            self.connectTimeoutMs = connectTimeoutMs
            self.stallTimeoutMs = stallTimeoutMs
            self.lowSpeedLimit = lowSpeedLimit
            self.lowSpeedTimeMs = lowSpeedTimeMs
            self.maxManifestBytes = maxManifestBytes
            self.maxReleaseBytes = maxReleaseBytes
            self.maxLegacyArchiveBytes = maxLegacyArchiveBytes
            self.caFile = caFile
            self.headers = headers
            self.userAgent = userAgent
            self.parallelDownloads = parallelDownloads
            self.differential = differential
            self.differentialMaxPercent = differentialMaxPercent
            self.allowUnsignedPlugins = allowUnsignedPlugins
            self.tcpQuickAck = tcpQuickAck
        }

        /// The C API's option names and values these fields stand for, in the order they are
        /// applied. Only spelling happens here: the core parses and checks every value.
        var settings: [(name: String, value: String)] {
            var out: [(String, String)] = []
            func add(_ name: String, _ value: String?) { if let value { out.append((name, value)) } }
            func flag(_ b: Bool?) -> String? { b.map { $0 ? "1" : "0" } }
            add("manifest_url", manifestURL)
            add("public_keys", publicKeys.map { $0.joined(separator: ",") })
            add("key_document", keyDocument)
            add("package", package)
            add("channel", channel)
            add("rollout_id", rolloutID)
            add("app_version", appVersion)
            add("variants", variants.map { $0.joined(separator: ",") })
            add("apply", apply?.rawValue)
            add("keep_versions", keepVersions.map(String.init))
            add("max_failed_launches", maxFailedLaunches.map(String.init))
            add("connect_timeout_ms", connectTimeoutMs.map(String.init))
            add("stall_timeout_ms", stallTimeoutMs.map(String.init))
            add("low_speed_limit", lowSpeedLimit.map(String.init))
            add("low_speed_time_ms", lowSpeedTimeMs.map(String.init))
            add("max_manifest_bytes", maxManifestBytes.map(String.init))
            add("max_release_bytes", maxReleaseBytes.map(String.init))
            add("max_legacy_archive_bytes", maxLegacyArchiveBytes.map(String.init))
            add("ca_file", caFile)
            if let headers {
                add("header", "")
                for h in headers { add("header", h) }
            }
            add("user_agent", userAgent)
            add("parallel_downloads", parallelDownloads.map(String.init))
            add("differential", differential.map { $0 ? "auto" : "off" })
            add("differential_max_percent", differentialMaxPercent.map(String.init))
            add("allow_unsigned_plugins", flag(allowUnsignedPlugins))
            add("tcp_quickack", flag(tcpQuickAck))
            add("allow_cross_origin_keys", flag(allowCrossOriginKeys))
            add("groups", groups.map { $0.joined(separator: ",") })
            add("group_quota_bytes", groupQuotaBytes.map(String.init))
            add("max_recv_speed", maxRecvSpeed.map(String.init))
            add("update_priority", updatePriority?.rawValue)
            add("fetch_priority", fetchPriority?.rawValue)
            add("metered", flag(metered))
            add("metered_max_bytes", meteredMaxBytes.map(String.init))
            add("mirrors", mirrors.map { $0.joined(separator: ",") })
            add("hedge_ms", hedgeMs.map(String.init))
            add("head_mirrors", flag(headMirrors))
            add("events", flag(events))
            add("events_max_bytes", eventsMaxBytes.map(String.init))
            return out
        }
    }
}
