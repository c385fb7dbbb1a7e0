import Glibc

/// Runs range consumers' work (inflating, hashing, writing, checking each file or chunk) on
/// worker threads, so that the thread driving the transfers only receives. One libcurl multi
/// handle calls every transfer's sink on the thread that drives it: without workers a ranged
/// install inflated, hashed and wrote 150 MB on that one thread while the other cores idled.
///
/// Each consumer's bytes are handed to it in order, on one worker at a time; different
/// consumers run on different workers at once. What the driving thread copies and the
/// workers have not consumed is bounded (`budget` bytes, whatever the number of transfers):
/// past it, `push` waits. A consumer's failure on a worker is thrown to the driving thread by
/// its next `push` or its `finish`, which fails that transfer as a failure in place did;
/// `finish`, `rest` and `abandon` run on the driving thread once the consumer's bytes are
/// consumed, so what a consumer says about a transfer is what it would have said in place.
final class ConsumerWorkers {
    /// The workers for `consumers` concurrent transfers: none where there is one processor (the
    /// consumers then run in place, `wrap` returns them as they are).
    init(transfers: Int, budget: Int = 1 << 20, processors: Int = availableProcessors()) {
        self.budget = budget
        let count = min(processors, 4, transfers)
        guard count > 1 else { return }
        for _ in 0..<count {
            guard let t = try? startThread({ [self] in work() }) else { break }
            threads.append(t)
        }
    }

    deinit { stop() }

    /// `c`, its work on the workers (as it is when there are none).
    func wrap(_ c: any RangeConsumer) -> any RangeConsumer {
        threads.isEmpty ? c : Piped(c, self)
    }

    /// Ends the workers once the work handed to them is done (every consumer finished or
    /// abandoned has none left).
    func stop() {
        cond.locked {
            stopping = true
            cond.broadcast()
        }
        for t in threads { pthread_join(t, nil) }
        threads = []
    }

    private let budget: Int
    private var threads: [pthread_t] = []
    private let cond = Condition()
    // Guarded by `cond`.
    private var ready: [Piped] = []
    private var readyHead = 0
    private var queued = 0
    /// The most bytes ever waiting for the workers (tests hold it within the budget).
    private var mostQueued = 0
    var peakQueued: Int { cond.locked { mostQueued } }
    var workerCount: Int { threads.count }
    private var stopping = false
    private var firstError: Error?
    /// The first failure a consumer met on a worker: what a batch that failed for another
    /// reason meanwhile (the connection dropped behind bytes that did not verify) reports.
    var firstFailure: Error? { cond.locked { firstError } }

    private func work() {
        while let (p, items, failed) = next() {
            var failure: Error?
            if !failed {
                for item in items {
                    do {
                        try item.withUnsafeBytes { try p.inner.push($0) }
                    } catch {
                        failure = error
                        break
                    }
                }
            }
            cond.locked {
                if let failure {
                    p.failure = failure
                    if firstError == nil { firstError = failure }
                }
                queued -= items.reduce(0) { $0 + $1.count }
                if p.pending.isEmpty {
                    p.running = false
                } else {
                    ready.append(p)  // bytes that came while these were consumed: kept in order
                }
                cond.broadcast()
            }
        }
    }

    /// The next consumer with bytes to consume (marked running, its bytes taken), and whether
    /// it failed before (its bytes are then dropped); nil once stopping.
    private func next() -> (Piped, [[UInt8]], failed: Bool)? {
        cond.locked {
            while readyHead == ready.count {
                if stopping { return nil }
                cond.wait(until: nil)
            }
            let p = ready[readyHead]
            readyHead += 1
            if readyHead == ready.count {
                ready.removeAll(keepingCapacity: true)
                readyHead = 0
            }
            defer { p.pending = [] }
            return (p, p.pending, p.failure != nil)
        }
    }

    /// A consumer whose `push` hands its bytes to the workers.
    private final class Piped: RangeConsumer {
        let inner: any RangeConsumer
        let pool: ConsumerWorkers
        // Guarded by the pool's `cond`.
        var pending: [[UInt8]] = []
        /// Queued for a worker or being consumed by one: never on two at once.
        var running = false
        var failure: Error?

        init(_ inner: any RangeConsumer, _ pool: ConsumerWorkers) {
            self.inner = inner
            self.pool = pool
        }

        var range: FetchRange { inner.range }

        func push(_ chunk: UnsafeRawBufferPointer) throws {
            guard !chunk.isEmpty else { return }
            let bytes = [UInt8](chunk)
            try pool.cond.locked {
                while pool.queued > 0 && pool.queued + bytes.count > pool.budget && failure == nil {
                    pool.cond.wait(until: nil)
                }
                if let failure { throw failure }
                pending.append(bytes)
                pool.queued += bytes.count
                pool.mostQueued = max(pool.mostQueued, pool.queued)
                if !running {
                    // Queued once: `running` stays set until a worker has consumed it all.
                    running = true
                    pool.ready.append(self)
                    pool.cond.broadcast()
                }
            }
        }

        /// Waits until the workers have consumed every byte handed over; what failed, if anything.
        private func drained() -> Error? {
            pool.cond.locked {
                while running { pool.cond.wait(until: nil) }
                return failure
            }
        }

        func finish() throws {
            if let failure = drained() { throw failure }
            try inner.finish()
        }

        /// The bytes handed over are consumed first (at most the budget): complete files among
        /// them are kept, as they were when consumers ran in place, so a failover asks the next
        /// source only for what follows them.
        func abandon() {
            _ = drained()
            inner.abandon()
        }

        func rest() -> (any RangeConsumer)? {
            _ = drained()
            return inner.rest().map { pool.wrap($0) }
        }
    }
}
