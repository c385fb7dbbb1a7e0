import Glibc

/// What every transfer of one client obeys while it runs, changed at any time from any thread:
/// a bandwidth cap shared by all of them, pause and resume, and background work yielding to
/// foreground work on the same data directory.
///
/// The cap is one token bucket for the whole client. Each piece of a response body libcurl
/// hands over takes its bytes from the bucket (which may go into debt by that one piece); while
/// the bucket is empty the write callback answers `CURL_WRITEFUNC_PAUSE`, so libcurl keeps the
/// piece and stops reading that socket (TCP's window then slows the sender), and the loop lets
/// the transfer go on once the bucket has refilled. Every loop of the client (an update's, a
/// group fetch's, each with its parallel requests) draws on the same bucket, so their sum stays
/// at the cap however many transfers run, and a new cap holds from the next piece on. libcurl's
/// own limit (`CURLOPT_MAX_RECV_SPEED_LARGE`) is per handle: four parallel requests would
/// each get the whole cap.
///
/// A pause, or background work yielding to a foreground transfer, holds each transfer at its
/// next piece the same way; one held longer than `releaseAfterMs` is taken apart (the loop
/// closes its connections) and asked for again from the byte it reached once it may go on.
package final class TransferControl: @unchecked Sendable {  // all state is behind `cond`
    /// A pause (or a yield to foreground work) that lasts longer than this closes connections.
    package static let releaseAfterMs: UInt64 = 2_000
    /// How often background transfers look for a foreground one of another process.
    static let probeIntervalMs: UInt64 = 100

    private let cond = Condition()
    private var rate: UInt64 = 0
    private var tokens: Double = 0
    private var refilledAt: UInt64 = 0
    private var paused = false
    /// Foreground work of this process, and the lock file that tells other processes of it.
    private var foregroundCount = 0
    private var foregroundFD: Int32 = -1
    private let foregroundLock: String?
    private var probeFD: Int32 = -1
    private var probedAt: UInt64 = 0
    private var foregroundElsewhere = false
    private var tickets: UInt64 = 0

    /// `foregroundLock`: the data directory's file a foreground transfer holds a shared lock on
    /// (nil: foreground work of this client only).
    package init(foregroundLock: String?) {
        self.foregroundLock = foregroundLock
    }

    deinit {
        if probeFD >= 0 { close(probeFD) }
        if foregroundFD >= 0 { close(foregroundFD) }
    }

    /// Bytes per second every transfer of the client shares; 0: no cap.
    package var maxRecvSpeed: UInt64 {
        get { cond.locked { rate } }
        set {
            cond.locked {
                rate = newValue
                tokens = min(tokens, capacity)
                refilledAt = monotonicMillis()
            }
            cond.broadcast()
        }
    }

    /// A twentieth of a second at the cap (at least one 16 KiB piece): the most a transfer gets
    /// at once after the bucket sat full.
    private var capacity: Double { max(Double(rate) / 20, 16384) }

    package func pause() { cond.locked { paused = true } }

    package func resume() {
        cond.locked { paused = false }
        cond.broadcast()
    }

    package var isPaused: Bool { cond.locked { paused } }

    /// Whether a transfer must wait now: the client is paused, or it is background work and a
    /// foreground transfer runs on the data directory.
    func mustHold(background: Bool) -> Bool {
        cond.locked { paused || (background && foregroundLocked()) }
    }

    /// Takes `n` bytes from the bucket; false (nothing taken) when it is empty.
    func take(_ n: Int) -> Bool {
        cond.locked { takeLocked(n) }
    }

    /// Whether a piece of `n` bytes may go on now, taking it from the bucket if so: not held
    /// (`mustHold`) and the bucket not empty. One lock per piece: the write callback's check.
    func admit(_ n: Int, background: Bool) -> Bool {
        cond.locked { !(paused || (background && foregroundLocked())) && takeLocked(n) }
    }

    private func takeLocked(_ n: Int) -> Bool {
        guard rate > 0 else { return true }
        refill()
        guard tokens > 0 else { return false }
        tokens -= Double(n)
        return true
    }

    /// The next place in the queue of held transfers.
    func ticket() -> UInt64 {
        cond.locked {
            tickets += 1
            return tickets
        }
    }

    /// Milliseconds until the bucket has bytes again (0: it has, or there is no cap).
    func refillWaitMs() -> UInt64 {
        cond.locked {
            guard rate > 0 else { return 0 }
            refill()
            return tokens > 0 ? 0 : UInt64((-tokens + 1) * 1000 / Double(rate)) + 1
        }
    }

    private func refill() {
        let now = monotonicMillis()
        tokens = min(capacity, tokens + Double(now - refilledAt) * Double(rate) / 1000)
        refilledAt = now
    }

    /// Runs `body` as foreground work: background transfers of the data directory, in this
    /// process and others, hold until it ends.
    package func foreground<T>(_ body: () throws -> T) rethrows -> T {
        cond.locked {
            foregroundCount += 1
            if foregroundCount == 1, let path = foregroundLock {
                let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
                if fd >= 0 {
                    _ = flock(fd, LOCK_SH)
                    foregroundFD = fd
                }
            }
        }
        defer {
            cond.locked {
                foregroundCount -= 1
                if foregroundCount == 0, foregroundFD >= 0 {
                    close(foregroundFD)
                    foregroundFD = -1
                }
            }
            cond.broadcast()
        }
        return try body()
    }

    /// Foreground work anywhere on the data directory (`cond` held): this process's count, or
    /// the lock file held by another process (looked at every `probeIntervalMs`).
    private func foregroundLocked() -> Bool {
        if foregroundCount > 0 { return true }
        guard let path = foregroundLock else { return false }
        let now = monotonicMillis()
        if now - probedAt < TransferControl.probeIntervalMs && probedAt > 0 { return foregroundElsewhere }
        probedAt = now
        // Not created here: no file, no foreground work (a look at a data directory changes nothing).
        if probeFD < 0 { probeFD = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        guard probeFD >= 0 else { return false }
        if flock(probeFD, LOCK_EX | LOCK_NB) == 0 {
            _ = flock(probeFD, LOCK_UN)
            foregroundElsewhere = false
        } else {
            foregroundElsewhere = errno == EWOULDBLOCK
        }
        return foregroundElsewhere
    }

    /// Blocks while transfers must hold (paused, or background behind foreground work), calling
    /// `tick` every 50 ms (progress reports the paused state); throws when cancelled.
    func waitWhileHeld(background: Bool, cancel: CancelToken, tick: () -> Void) throws {
        while mustHold(background: background) {
            try cancel.check()
            tick()
            cond.locked { cond.wait(until: monotonicMillis() + 50) }
        }
        try cancel.check()
    }
}
