import Glibc
import Testing
@testable import AssetPatchCore

/// Work run beside other work (a rebuild beside a fetch): both run to their end, a failure of
/// the main work stops the side work and is the one reported, a failure of the side work is
/// never lost, and a caller's cancel reaches the side work through its own token.
@Suite struct AlongsideTests {
    /// Loops until `stop` is cancelled (then throws `.cancelled`), for at most a minute.
    static func untilStopped(_ stop: CancelToken, _ saw: Locked<Bool>) throws {
        let end = monotonicMillis() + 60_000
        while monotonicMillis() < end {
            if stop.isCancelled {
                saw.withLock { $0 = true }
                throw AssetPatchError(.cancelled, "stopped")
            }
            usleep(1000)
        }
    }

    @Test func bothRunAndTheMainResultIsReturned() throws {
        let stop = CancelToken()
        let side = Locked<pthread_t?>(nil)
        let result = try alongside({ side.withLock { $0 = pthread_self() } }, stopping: stop) { 42 }
        #expect(result == 42)
        let thread = try #require(side.withLock { $0 })
        #expect(pthread_equal(thread, pthread_self()) == 0, "the side work ran on a thread of its own")
        #expect(!stop.isCancelled)
    }

    @Test func theMainWorkRunsWhileTheSideWorkDoes() throws {
        // The side work waits for the main work's signal, and the main work for the side's
        // (a minute at most each): both signals arrive only if the two run at once.
        let signals = Condition()
        var fromMain = false, fromSide = false
        func wait(_ flag: () -> Bool) -> Bool {
            let end = monotonicMillis() + 60_000
            return signals.locked {
                while !flag() && monotonicMillis() < end { signals.wait(until: end) }
                return flag()
            }
        }
        let sideSaw = Locked(false)
        let mainSaw = try alongside({
            signals.locked { fromSide = true; signals.broadcast() }
            sideSaw.withLock { $0 = wait { fromMain } }
        }, stopping: CancelToken()) { () -> Bool in
            signals.locked { fromMain = true; signals.broadcast() }
            return wait { fromSide }
        }
        #expect(mainSaw && sideSaw.withLock { $0 })
    }

    @Test func aFailedMainStopsTheSideWorkAndIsWhatIsThrown() {
        let stop = CancelToken()
        let saw = Locked(false)
        let status = statusOf {
            _ = try alongside({ try AlongsideTests.untilStopped(stop, saw) }, stopping: stop) { () throws -> Int in
                throw AssetPatchError(.network, "the fetch failed")
            }
        }
        #expect(status == .network)
        #expect(saw.withLock { $0 }, "the side work saw the stop before alongside returned")
    }

    @Test func aFailedSideIsThrownOnceTheMainWorkIsDone() {
        let stop = CancelToken()
        let mainDone = Locked(false)
        let status = statusOf {
            _ = try alongside({ throw AssetPatchError(.integrity, "a rebuilt file is wrong") }, stopping: stop) {
                mainDone.withLock { $0 = true }
            }
        }
        #expect(status == .integrity)
        #expect(mainDone.withLock { $0 })
        #expect(!stop.isCancelled, "the main work is not stopped by the side's failure")
    }

    @Test func theCallersCancelReachesTheSideWorkAndNotTheOtherWay() {
        let caller = CancelToken()
        let stop = CancelToken(within: caller)
        stop.cancel()
        #expect(stop.isCancelled)
        #expect(!caller.isCancelled)

        let side = CancelToken(within: caller)
        let saw = Locked(false)
        let status = statusOf {
            try alongside({ try AlongsideTests.untilStopped(side, saw) }, stopping: side) {
                caller.cancel()
            }
        }
        #expect(status == .cancelled, "the side work stopped by the caller's cancel reports it")
        #expect(saw.withLock { $0 })
    }
}
