import Glibc
import Testing
@testable import AssetPatchCore

/// Range consumers' work on worker threads (`ConsumerWorkers`): each consumer's bytes in
/// order, consumers at once on different workers, failures thrown to the driving thread, and
/// the bytes waiting for the workers within the budget.
@Suite struct ConsumerWorkersTests {
    struct Refused: Error, Equatable { var at: Int }

    /// Keeps what it is pushed and the threads it ran on; `onPush` runs before each push is kept.
    final class Recorder: RangeConsumer, @unchecked Sendable {  // touched by one worker at a time
        let range = FetchRange(start: 0, end: 1 << 40, entries: [])
        var bytes: [UInt8] = []
        var pushes = 0
        var threads = Set<UInt>()
        var finished = false
        var abandoned = false
        let onPush: (Int) throws -> Void

        init(onPush: @escaping (Int) throws -> Void = { _ in }) { self.onPush = onPush }

        func push(_ chunk: UnsafeRawBufferPointer) throws {
            threads.insert(UInt(pthread_self()))
            try onPush(pushes)
            pushes += 1
            bytes += chunk
        }
        func finish() throws { finished = true }
        func abandon() { abandoned = true }
        func rest() -> (any RangeConsumer)? { nil }
    }

    /// A flag another thread raises; `wait` gives up after a minute (a hang, not a timing).
    final class Flag: @unchecked Sendable {
        let cond = Condition()
        var raised = false
        func raise() { cond.locked { raised = true; cond.broadcast() } }
        func wait() -> Bool {
            cond.locked {
                let deadline = monotonicMillis() + 60_000
                while !raised && monotonicMillis() < deadline { cond.wait(until: deadline) }
                return raised
            }
        }
    }

    func pattern(_ n: Int, _ seed: UInt8) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed } }

    @Test func eachConsumerGetsItsBytesInOrderOffTheDrivingThread() throws {
        let workers = ConsumerWorkers(transfers: 3, processors: 2)
        defer { workers.stop() }
        #expect(workers.workerCount == 2)
        let recorders = (0..<3).map { _ in Recorder() }
        let wrapped = recorders.map(workers.wrap)
        let data = (0..<3).map { pattern(100_003 + $0, UInt8($0)) }
        // Interleaved, in pieces of odd sizes (buffer multiples and not).
        var at = [0, 0, 0]
        var step = 0
        while at.contains(where: { $0 < 100_003 }) {
            for i in 0..<3 where at[i] < data[i].count {
                let n = min([1, 4096, 777, 16384][step % 4], data[i].count - at[i])
                try data[i][at[i]..<(at[i] + n)].withUnsafeBytes { try wrapped[i].push($0) }
                at[i] += n
                step += 1
            }
        }
        for w in wrapped { try w.finish() }
        for (r, d) in zip(recorders, data) {
            #expect(r.bytes == d)
            #expect(r.finished)
            #expect(!r.threads.contains(UInt(pthread_self())))
        }
    }

    @Test func twoConsumersRunAtOnce() throws {
        let workers = ConsumerWorkers(transfers: 2, processors: 2)
        defer { workers.stop() }
        let bStarted = Flag()
        var aSawB = false
        let a = Recorder { _ in aSawB = bStarted.wait() }  // blocks its worker until B runs
        let b = Recorder { _ in bStarted.raise() }
        let (wa, wb) = (workers.wrap(a), workers.wrap(b))
        try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try wa.push($0) }
        try [UInt8](repeating: 2, count: 10).withUnsafeBytes { try wb.push($0) }
        try wa.finish()
        try wb.finish()
        #expect(aSawB)
        #expect(a.threads != b.threads)
    }

    @Test func aFailureOnAWorkerIsThrownToTheDrivingThreadAndNothingAfterItIsPushed() throws {
        let workers = ConsumerWorkers(transfers: 2, processors: 2)
        defer { workers.stop() }
        let failing = Recorder { n in if n == 2 { throw Refused(at: n) } }
        let w = workers.wrap(failing)
        var thrown: Error?
        for i in 0..<50 {
            do {
                try [UInt8](repeating: UInt8(i), count: 100).withUnsafeBytes { try w.push($0) }
            } catch {
                thrown = error
                break
            }
        }
        if thrown == nil {
            #expect(throws: Refused(at: 2)) { try w.finish() }
        } else {
            #expect(thrown as? Refused == Refused(at: 2))
            #expect(throws: Refused(at: 2)) { try w.finish() }
        }
        #expect(failing.pushes == 2 && failing.bytes.count == 200)
        #expect(!failing.finished)
        w.abandon()
        #expect(failing.abandoned)
    }

    @Test func abandoningConsumesWhatWasHandedOverFirst() throws {
        // A failover asks the next source only for what follows the files these bytes complete.
        let workers = ConsumerWorkers(transfers: 2, processors: 2)
        defer { workers.stop() }
        let handedOver = Flag()
        let r = Recorder { n in if n == 0 { _ = handedOver.wait() } }
        let w = workers.wrap(r)
        let data = pattern(10 * 1000, 5)
        for start in stride(from: 0, to: data.count, by: 1000) {
            try data[start..<(start + 1000)].withUnsafeBytes { try w.push($0) }
        }
        handedOver.raise()
        w.abandon()
        #expect(r.bytes == data)
        #expect(r.abandoned && !r.finished)
        #expect(workers.firstFailure == nil)
    }

    @Test func theFirstFailureOnAnyWorkerIsKeptForTheBatch() throws {
        let workers = ConsumerWorkers(transfers: 2, processors: 2)
        defer { workers.stop() }
        let w = workers.wrap(Recorder { _ in throw Refused(at: 9) })
        try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try w.push($0) }
        w.abandon()
        #expect(workers.firstFailure as? Refused == Refused(at: 9))
    }

    @Test func bytesWaitingForTheWorkersStayWithinTheBudget() throws {
        let budget = 64 << 10
        let workers = ConsumerWorkers(transfers: 2, budget: budget, processors: 2)
        defer { workers.stop() }
        // The consumer holds its first push until a budget's worth waits behind it.
        let slow = Recorder { n in
            if n == 0 { while workers.peakQueued < budget - 4096 { usleep(1000) } }
        }
        let w = workers.wrap(slow)
        let data = pattern(40 * budget, 7)
        for start in stride(from: 0, to: data.count, by: 4096) {
            try data[start..<(start + 4096)].withUnsafeBytes { try w.push($0) }
        }
        try w.finish()
        #expect(slow.bytes == data)
        #expect(workers.peakQueued <= budget)
    }

    @Test func withOneProcessorConsumersRunInPlace() throws {
        let workers = ConsumerWorkers(transfers: 4, processors: 1)
        defer { workers.stop() }
        let r = Recorder()
        let w = workers.wrap(r)
        #expect(w === r)
        try [UInt8](repeating: 3, count: 5).withUnsafeBytes { try w.push($0) }
        #expect(r.threads == [UInt(pthread_self())])
    }
}
