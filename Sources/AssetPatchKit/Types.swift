internal import AssetPatchCore

/// Why an assetpatch call failed: the status a program branches on and a message for people.
///
/// The statuses are those of the C API (`assetpatch_status`), one to one. Updates that are
/// cancelled, through ``AssetPatchClient/cancel()`` or the calling task's cancellation, fail
/// with ``Status/cancelled``.
public struct AssetPatchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, as a code.
    public let status: Status
    /// What failed and where: the URL, the HTTP status, the entry, the path.
    public let message: String

    /// A failure with this status and message.
    public init(_ status: Status, _ message: String) {
        self.status = status
        self.message = message
    }

    init(_ core: AssetPatchCore.AssetPatchError) {
        self.init(Status(core.status), core.message)
    }

    /// The status's C name and the message, e.g. `ASSETPATCH_ERR_NETWORK: GET …: connection refused`.
    public var description: String { "\(status.name): \(message)" }

    /// The outcome codes of the C API (`assetpatch_status`), mirrored one to one.
    public enum Status: Int32, Sendable, CaseIterable {
        /// A bad argument: an unknown option or a bad value, an invalid resource name.
        case argument = -1
        /// The data directory could not be read or written (permissions, disk full).
        case io = -2
        /// No connection, a timeout, a stalled or truncated transfer.
        case network = -3
        /// The server answered with an HTTP error, or a TLS verification failure.
        case http = -4
        /// The manifest is malformed or inconsistent.
        case manifest = -5
        /// The manifest's signature is missing or does not verify against the public keys.
        case signature = -6
        /// Downloaded bytes do not match the manifest's sizes or sha256.
        case integrity = -7
        /// The archive is malformed or hostile (bad paths, sizes, zip bombs).
        case archive = -8
        /// Kept for the C API's numbering: since 0.4 an older manifest than one accepted before is
        /// no update (``CheckOutcome/Reason/older``), and nothing returns this.
        case downgrade = -9
        /// The manifest has expired.
        case expired = -10
        /// The release needs another app version.
        case incompatible = -11
        /// No such resource, release or plugin.
        case notFound = -12
        /// A buffer was too small (not raised by this API, which sizes its own).
        case range = -13
        /// The update was cancelled.
        case cancelled = -14
        /// Another update is running on this client or on the data directory.
        case busy = -15
        /// Not valid now: no manifest URL set, nothing to roll back, a closed client.
        case state = -16
        /// The resource's group is not on disk: fetch it first (the message names the group).
        case notLocal = -17
        /// `group_quota_bytes` can't hold the groups asked for beside pinned and wanted ones.
        case quota = -18
        /// The network is metered and the transfer plans more than `metered_max_bytes`.
        case metered = -19
        /// A bug in assetpatch; please report it with the message.
        case `internal` = -99

        init(_ core: AssetPatchCore.Status) {
            self = Status(rawValue: core.rawValue) ?? .internal
        }

        /// The C constant's name, e.g. `ASSETPATCH_ERR_NETWORK`.
        public var name: String { AssetPatchCore.Status(rawValue: rawValue).map { "\($0.name)" } ?? "ASSETPATCH_ERR_INTERNAL" }
    }
}

/// Runs a core call, turning its errors into ``AssetPatchError``.
func mapped<T>(_ body: () throws -> T) throws(AssetPatchError) -> T {
    do {
        return try body()
    } catch let e as AssetPatchCore.AssetPatchError {
        throw AssetPatchError(e)
    } catch let e as AssetPatchError {
        throw e
    } catch {
        throw AssetPatchError(.internal, "\(error)")
    }
}

/// The phases of an update, in the order they run.
public enum UpdatePhase: Int32, Sendable, Comparable {
    /// Fetching and verifying the manifest.
    case check = 1
    /// Transferring the archive, or the changed files' ranges of it.
    case download = 2
    /// Building the new release on disk.
    case install = 3
    /// Switching to it.
    case activate = 4
    /// Finished.
    case done = 5

    public static func < (a: UpdatePhase, b: UpdatePhase) -> Bool { a.rawValue < b.rawValue }
}

/// Where a running update is. Byte and file counts are those of the current phase; the totals
/// are 0 where unknown. Within a phase `bytesDone` never goes backwards.
/// Whether a transfer yields (background) to foreground work on the same data directory.
public enum TransferPriority: String, Sendable {
    case foreground, background
}

public struct UpdateProgress: Sendable, Equatable {
    /// The phase the update is in.
    public var phase: UpdatePhase
    /// Bytes of the phase done so far.
    public var bytesDone: UInt64
    /// Bytes the phase will take, or 0 when unknown.
    public var bytesTotal: UInt64
    /// Files of the phase done so far.
    public var filesDone: UInt64
    /// Files the phase will take, or 0 when unknown.
    public var filesTotal: UInt64
    /// Transfers hold: the client is paused, or this background work yields to foreground work.
    public var paused: Bool
    /// Install: of the files done, those taken from disk (an installed release, the bundle)
    /// rather than from bytes this update fetched.
    public var filesReused: UInt64
    /// Install: their bytes, and a chunked file's chunks found on disk.
    public var bytesReused: UInt64

    /// `bytesDone / bytesTotal` between 0 and 1, or nil when the total is unknown.
    public var fraction: Double? { bytesTotal == 0 ? nil : min(1, Double(bytesDone) / Double(bytesTotal)) }

    init(_ p: AssetPatchCore.Progress) {
        phase = UpdatePhase(rawValue: p.phase.rawValue) ?? .check
        bytesDone = p.bytesDone
        bytesTotal = p.bytesTotal
        filesDone = p.filesDone
        filesTotal = p.filesTotal
        paused = p.paused
        filesReused = p.filesReused
        bytesReused = p.bytesReused
    }
}

/// What ``AssetPatchClient/updates()`` yields: the update's progress, then its outcome.
public enum UpdateEvent: Sendable, Equatable {
    /// The update moved on.
    case progress(UpdateProgress)
    /// The update ended: true when a release was installed, false when already current.
    case finished(installed: Bool)
}

/// A newer release a check found.
public struct AvailableUpdate: Sendable, Equatable {
    /// Its version.
    public var version: Int64
    /// Bytes an update would transfer now: the changed files' ranges, or what is left of the
    /// archive.
    public var downloadBytes: UInt64
}

/// A release's description from its signed manifest.
public struct ReleaseDetails: Sendable, Equatable {
    /// Its version.
    public var version: Int64
    /// When it was published (seconds since 1970), if the manifest says.
    public var created: Int64?
    /// The publisher's short label, if any.
    public var label: String?
    /// The release notes, if any.
    public var notes: String?
    /// Whether the publisher marked it mandatory.
    public var mandatory: Bool
    /// Whether its manifest's signature was verified against the configured public keys.
    public var signatureVerified: Bool
    /// Whether the app confirmed it (``AssetPatchClient/markGood()``).
    public var markedGood: Bool
    /// The channel it comes from (`"stable"` when its manifest named none).
    public var channel: String
    /// Its manifest's rollout share in percent (a candidate: in force at the check; an
    /// installed release: when it was installed); nil when the manifest had no rollout.
    public var rolloutPercent: Double?

    init(_ s: ReleaseSummary) {
        version = s.version
        created = s.created
        label = s.label
        notes = s.notes
        mandatory = s.mandatory
        signatureVerified = s.signatureVerified
        markedGood = s.markedGood
        channel = s.channel
        rolloutPercent = s.rolloutBasisPoints.map { Double($0) / 100 }
    }
}

/// Which release ``AssetPatchClient/release(_:)`` describes.
public enum WhichRelease: Sendable {
    /// The release served now.
    case active
    /// A release installed with ``AssetPatchClient/Options/ApplyMode/nextOpen``, served from the next open.
    case pending
    /// The newer release the last check or update found.
    case available

    var core: AssetPatchCore.WhichRelease {
        switch self {
        case .active: .active
        case .pending: .pending
        case .available: .candidate
        }
    }
}

/// The release lifecycle: what is served, whether the app confirmed it, and the last rollback.
public struct Lifecycle: Sendable, Equatable {
    /// The version served; 0 when only the bundle is.
    public var activeVersion: Int64
    /// A release served from the next open; 0 when none.
    public var pendingVersion: Int64
    /// Whether the app confirmed the active release (``AssetPatchClient/markGood()``).
    public var activeMarkedGood: Bool
    /// Opens of the active release while not confirmed.
    public var launches: Int
    /// The limit of such opens before an open rolls back; 0: never.
    public var maxFailedLaunches: Int
    /// Versions rolled back from, which updates skip until a newer one is published.
    public var badVersions: Int
    /// The last rollback, if any.
    public var lastRollback: Rollback?

    /// A rollback: from which version to which (0: the bundle), why, and when.
    public struct Rollback: Sendable, Equatable {
        /// The version left.
        public var from: Int64
        /// The version served after it; 0: the bundle.
        public var to: Int64
        /// Why, e.g. a crash loop.
        public var reason: String
        /// When (seconds since 1970).
        public var time: Int64
    }

    init(_ s: LifecycleSummary) {
        activeVersion = s.activeVersion
        pendingVersion = s.pendingVersion
        activeMarkedGood = s.activeMarkedGood
        launches = s.launches
        maxFailedLaunches = s.maxFailedLaunches
        badVersions = s.badVersions
        lastRollback = s.lastRollback.map { Rollback(from: $0.from, to: $0.to, reason: $0.reason, time: $0.time) }
    }
}

/// What the last check or update found, and why it found nothing to install.
public struct CheckOutcome: Sendable, Equatable {
    /// Why there was nothing to install.
    public enum Reason: Int32, Sendable {
        /// The manifest offers the release installed (active, or pending).
        case current = 1
        /// The manifest is older than one accepted before: a cache still serving an old
        /// manifest, or a replay. Nothing older is ever installed.
        case older = 2
        /// A version this client rolled back from.
        case badVersion = 3
        /// The app's bundle carries that release, or a newer one.
        case inBundle = 4
        /// The manifest's staged rollout does not include this client (yet), or is halted.
        case notInRollout = 5
        /// Not given since 0.5: a client follows one channel and moves to another, up or down,
        /// when the host names it (``AssetPatchClient/Options/channel``).
        case channelBehind = 6
    }

    /// Whether a release was found (or installed): false when there was nothing to install or
    /// the call failed.
    public var found: Bool
    /// Why nothing was to install; nil when something was, or the call failed (``error``).
    public var reason: Reason?
    /// The failure, when the call failed.
    public var error: AssetPatchError.Status?
    /// The version the manifest offered; 0 when none was read.
    public var manifestVersion: Int64
    /// The highest version accepted before that call from the manifest's channel.
    public var acceptedVersion: Int64
    /// The manifest's channel; "" when none was read.
    public var channel: String
    /// The manifest's rollout share in force, in percent; nil without a rollout.
    public var rolloutPercent: Double?
    /// This client's bucket (0..<10000) for that release: it takes it iff
    /// `bucket < rolloutPercent * 100`.
    public var rolloutBucket: Int?
    /// Whose head it took: 0 the manifest URL, N the Nth mirror; nil when it took none.
    public var source: Int?

    init(_ o: AssetPatchCore.CheckOutcome) {
        source = o.source
        found = o.status == .ok
        reason = o.reason.flatMap { Reason(rawValue: $0.rawValue) }
        error = o.status.rawValue < 0 ? AssetPatchError.Status(o.status) : nil
        manifestVersion = o.manifestVersion
        acceptedVersion = o.acceptedVersion
        channel = o.channel ?? ""
        rolloutPercent = o.rollout.map { Double($0.basisPoints) / 100 }
        rolloutBucket = o.rollout?.bucket
    }
}

/// One source of the repository (the manifest URL, then the mirrors) as the last check or
/// update left it.
public struct SourceInfo: Sendable, Equatable {
    /// Its head's URL, without credentials or query.
    public var url: String
    /// Taken out of that check's or update's work: it failed, was silent, or served an older head.
    public var demoted: Bool
    /// Its head was the one taken.
    public var servedHead: Bool
    public var requests: Int
    /// Body bytes it delivered.
    public var bytes: UInt64
    /// Its last result: what it served, or its failure's message.
    public var last: String
}

/// A plugin the active release ships.
public struct PluginInfo: Sendable, Equatable {
    /// Its name, as ``AssetPatchClient/loadPlugin(_:symbol:)`` takes it.
    public var name: String
    /// The plugin's own version, if the manifest gives one.
    public var version: String?
    /// The symbol loaded when none is named.
    public var entry: String
    /// The ABI tag the publisher gave it, if any.
    public var abi: String?
}

/// The level of a log message.
public enum LogLevel: Int, Sendable, Comparable {
    /// Details: each request, each resume.
    case debug = 0
    /// What happened: an update started, a release installed.
    case info = 1
    /// Something went wrong and was handled: a retry, a fallback, a rollback.
    case warning = 2
    /// A call failed (the message is also the error's).
    case error = 3

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}
