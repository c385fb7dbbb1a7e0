import Glibc
import Synchronization

/// Monotonic milliseconds (CLOCK_MONOTONIC), for timeouts and progress pacing.
package func monotonicMillis() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
}

/// Wall-clock seconds since the epoch, for `expires`.
package func unixTime() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec)
}

/// Wall-clock nanoseconds since the epoch (CLOCK_REALTIME): the clock file timestamps follow.
func wallClockNanos() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// A cancellation flag shared by the caller's thread and the updating thread.
package final class CancelToken: Sendable {
    private let flag = Atomic<Bool>(false)
    /// Cancelling it cancels this one too (work on a side thread that stops on its own when
    /// the work beside it fails, and with the update when the caller cancels).
    private let parent: CancelToken?

    package init(within parent: CancelToken? = nil) {
        self.parent = parent
    }

    package var isCancelled: Bool { flag.load(ordering: .acquiring) || parent?.isCancelled == true }
    package func cancel() { flag.store(true, ordering: .releasing) }
    package func reset() { flag.store(false, ordering: .releasing) }

    package func check() throws {
        if isCancelled { throw AssetPatchError(.cancelled, "update cancelled") }
    }

    /// Sleeps up to `ms`, waking early (and throwing) when cancelled.
    package func sleep(ms: UInt64) throws {
        let end = monotonicMillis() + ms
        while monotonicMillis() < end {
            try check()
            usleep(20_000)
        }
        try check()
    }
}
