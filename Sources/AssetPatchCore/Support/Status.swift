import Glibc

/// The outcome codes of the C ABI, mirrored one to one (`assetpatch_status` in the header).
package enum Status: Int32, Sendable, CaseIterable {
    case ok = 0
    case noUpdate = 1
    case argument = -1
    case io = -2
    case network = -3
    case http = -4
    case manifest = -5
    case signature = -6
    case integrity = -7
    case archive = -8
    case downgrade = -9
    case expired = -10
    case incompatible = -11
    case notFound = -12
    case range = -13
    case cancelled = -14
    case busy = -15
    case state = -16
    case notLocal = -17
    case quota = -18
    case metered = -19
    case `internal` = -99

    /// The C enum constant's name, e.g. `ASSETPATCH_ERR_IO`.
    package var name: StaticString {
        switch self {
        case .ok: "ASSETPATCH_OK"
        case .noUpdate: "ASSETPATCH_NO_UPDATE"
        case .argument: "ASSETPATCH_ERR_ARGUMENT"
        case .io: "ASSETPATCH_ERR_IO"
        case .network: "ASSETPATCH_ERR_NETWORK"
        case .http: "ASSETPATCH_ERR_HTTP"
        case .manifest: "ASSETPATCH_ERR_MANIFEST"
        case .signature: "ASSETPATCH_ERR_SIGNATURE"
        case .integrity: "ASSETPATCH_ERR_INTEGRITY"
        case .archive: "ASSETPATCH_ERR_ARCHIVE"
        case .downgrade: "ASSETPATCH_ERR_DOWNGRADE"
        case .expired: "ASSETPATCH_ERR_EXPIRED"
        case .incompatible: "ASSETPATCH_ERR_INCOMPATIBLE"
        case .notFound: "ASSETPATCH_ERR_NOT_FOUND"
        case .range: "ASSETPATCH_ERR_RANGE"
        case .cancelled: "ASSETPATCH_ERR_CANCELLED"
        case .busy: "ASSETPATCH_ERR_BUSY"
        case .state: "ASSETPATCH_ERR_STATE"
        case .notLocal: "ASSETPATCH_ERR_NOT_LOCAL"
        case .quota: "ASSETPATCH_ERR_QUOTA"
        case .metered: "ASSETPATCH_ERR_METERED"
        case .internal: "ASSETPATCH_ERR_INTERNAL"
        }
    }
}

/// Every failure the core reports: a status for programs and a message for people.
/// The message says what failed and where (URL, HTTP status, entry name, path).
package struct AssetPatchError: Error, Sendable, CustomStringConvertible {
    package let status: Status
    package let message: String
    /// Worth retrying: a dropped or refused connection, a timeout or stall, a truncated transfer,
    /// a 5xx answer, a 429 that says when to come back. Never set for what a retry can't change
    /// (a redirect loop, a TLS verification failure, another 4xx, bad bytes).
    package let transient: Bool
    /// The server's Retry-After, when it sent one.
    package let retryAfterMs: UInt64?
    /// The errno of a failed system call (ERR_IO), for callers that act on it (a full disk).
    package let errno: Int32?
    /// A transfer taken apart during a long pause (or a yield to foreground work) that could
    /// not go on from where it stopped: a retry after the resume starts it over, not counted.
    package let released: Bool

    package init(_ status: Status, _ message: String, transient: Bool = false, retryAfterMs: UInt64? = nil, errno: Int32? = nil,
                 released: Bool = false) {
        self.status = status
        self.message = message
        self.transient = transient
        self.retryAfterMs = retryAfterMs
        self.errno = errno
        self.released = released
    }

    /// The file system is full (ENOSPC) or the user's quota is used up (EDQUOT).
    package var isDiskFull: Bool { errno == ENOSPC || errno == EDQUOT }

    package var description: String { "\(status.name): \(message)" }
}

/// How much a log line matters (`assetpatch_log_fn`'s level): what the host filters on.
package enum LogLevel: Int32, Sendable, Comparable {
    case debug = 0, info = 1, warning = 2, error = 3

    package static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

extension Status {
    /// The code outcome events give a result: "ok", "no_update", "err_network", … (the C
    /// constant's name without its prefix, in lower case).
    package var eventCode: String {
        String(String(describing: name).dropFirst("ASSETPATCH_".count)).lowercased()
    }
}
