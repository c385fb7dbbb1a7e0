/// The phases of an update, in order (`assetpatch_phase`).
package enum Phase: Int32, Sendable {
    case check = 1, download = 2, install = 3, activate = 4, done = 5
}

package struct Progress: Sendable, Equatable {
    package var phase: Phase
    package var bytesDone: UInt64 = 0
    package var bytesTotal: UInt64 = 0
    package var filesDone: UInt64 = 0
    package var filesTotal: UInt64 = 0
    /// Install: of the files done, those taken from disk (an installed release or the bundle)
    /// rather than from bytes this update fetched, and their bytes (with a chunked file, the
    /// bytes of its chunks found on disk).
    package var filesReused: UInt64 = 0
    package var bytesReused: UInt64 = 0
    /// Transfers are held: the client is paused, or this background work yields to foreground
    /// work (set by the reporter, not by those who count).
    package var paused = false

    package init(phase: Phase, bytesDone: UInt64 = 0, bytesTotal: UInt64 = 0, filesDone: UInt64 = 0, filesTotal: UInt64 = 0) {
        self.phase = phase
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.filesDone = filesDone
        self.filesTotal = filesTotal
    }

    /// Install counts, with the files and bytes of them taken from disk.
    init(phase: Phase, bytesDone: UInt64, bytesTotal: UInt64, filesDone: UInt64, filesTotal: UInt64,
         reused: (files: UInt64, bytes: UInt64)) {
        self.init(phase: phase, bytesDone: bytesDone, bytesTotal: bytesTotal, filesDone: filesDone, filesTotal: filesTotal)
        (filesReused, bytesReused) = reused
    }
}

/// The caller's progress callback; returning true cancels the update.
package typealias ProgressHandler = (Progress) -> Bool

/// Paces progress callbacks: at most every 50 ms, always at a phase change and for a phase's
/// final counts. A `true` from the callback cancels through the update's token.
final class ProgressReporter {
    static let intervalMs: UInt64 = 50
    let handler: ProgressHandler?
    let cancel: CancelToken
    /// Whether transfers are held now (`Progress.paused`).
    let held: (() -> Bool)?
    private var last = Progress(phase: .check)
    private var lastTime: UInt64 = 0
    private var pending = false
    private var started = false

    init(_ handler: ProgressHandler?, cancel: CancelToken, held: (() -> Bool)? = nil) {
        self.handler = handler
        self.cancel = cancel
        self.held = held
    }

    /// Reports `p`; `final` forces delivery (a phase's last numbers).
    func report(_ p: Progress, final: Bool = false) {
        guard let handler else { return }
        var p = p
        // bytes_done never goes backwards within a phase, except a download restart from zero.
        if started && p.phase == last.phase && p.bytesDone < last.bytesDone && !(p.phase == .download && p.bytesDone == 0) {
            p.bytesDone = last.bytesDone
        }
        let now = monotonicMillis()
        let phaseChanged = !started || p.phase != last.phase
        if phaseChanged && started && pending {
            // Deliver the previous phase's final numbers before moving on.
            deliver(last, handler)
        }
        last = p
        started = true
        if phaseChanged || final || now - lastTime >= ProgressReporter.intervalMs {
            lastTime = now
            // While transfers hold, the same numbers still reach the host every interval: the
            // paused state, and its chance to cancel from the callback.
            deliver(p, handler, repeated: held?() == true)
        } else {
            pending = true
        }
    }

    /// Reports the last numbers again (a wait that counts nothing: the paused state, and a
    /// callback's chance to cancel, still reach the host).
    func again() {
        guard let handler, started else { return }
        let now = monotonicMillis()
        guard now - lastTime >= ProgressReporter.intervalMs else { return }
        lastTime = now
        deliver(last, handler, repeated: true)
    }

    /// The last report delivered: the same numbers twice in a row (a phase's start and end
    /// with nothing counted between, as for the check) are delivered once.
    private var delivered: Progress?

    private func deliver(_ p: Progress, _ handler: ProgressHandler, repeated: Bool = false) {
        var p = p
        p.paused = held?() == true
        pending = false
        guard p != delivered || repeated else { return }
        delivered = p
        if handler(p) { cancel.cancel() }
    }
}
