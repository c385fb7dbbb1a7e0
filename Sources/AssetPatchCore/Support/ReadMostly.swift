import Glibc
import Synchronization
internal import CSystem

/// A reference many threads read and one now and then replaces (what resolving reads), read
/// without a lock, an atomic read-modify-write or a retain, the way read-copy-update works.
///
/// A reader counts itself into its thread's record with plain stores, loads the reference and
/// uses it borrowed. A writer stores the new reference, then waits out a grace period before it
/// releases the old one: `membarrier(2)` makes every running thread of the process execute a
/// memory barrier, after which each reader either has its mark visible to the writer (which
/// waits until it is cleared) or loads the new reference. Readers pay a thread-specific lookup
/// and two plain stores; the writer a system call and the wait for readers in flight (a lookup
/// takes well under a microsecond). Where membarrier is unavailable (an old kernel, a seccomp
/// filter) readers mark themselves with a full fence instead, and the writer fences too.
///
/// A reader must not replace the cell it reads: the writer would wait for itself.
final class ReadMostly<T: AnyObject>: @unchecked Sendable {  // `current` is atomic; writers serialise on `writers`
    /// A +1 reference to the current value.
    private let current: Atomic<UnsafeMutableRawPointer>
    private let writers = Locked(())
    private let readers: Readers

    /// `readers`: how readers and writers are ordered (tests pass one that fences).
    init(_ value: T, readers: Readers = .shared) {
        current = Atomic(Unmanaged.passRetained(value).toOpaque())
        self.readers = readers
    }

    deinit {
        Unmanaged<T>.fromOpaque(current.load(ordering: .relaxed)).release()
    }

    /// Runs `body` with the current value, borrowed: valid until `body` returns.
    @inline(__always)
    func read<R>(_ body: (T) -> R) -> R {
        let record = readers.enter()
        defer { readers.leave(record) }
        return Unmanaged<T>.fromOpaque(current.load(ordering: .acquiring))._withUnsafeGuaranteedRef(body)
    }

    /// Replaces the value with `make(old)` and returns once no reader can still see the old one,
    /// which is released then.
    func replace(_ make: (T) throws -> T) rethrows {
        try writers.withLock { _ in
            let old = current.load(ordering: .relaxed)
            let new = try Unmanaged<T>.fromOpaque(old)._withUnsafeGuaranteedRef(make)
            current.store(Unmanaged.passRetained(new).toOpaque(), ordering: .releasing)
            // Should the grace period fail, the old value is kept: a leak, never a use after free.
            if readers.waitForReaders() { Unmanaged<T>.fromOpaque(old).release() }
        }
    }
}

/// A thread's mark while it reads `ReadMostly` cells, written by that thread only: `sequence`
/// is odd while it reads (the outermost read adds one as it begins and one as it ends), so a
/// writer waits for the read it saw in flight and never for the reads that follow it.
final class ReaderRecord: @unchecked Sendable {  // both fields are atomic
    let sequence = Atomic<UInt64>(0)
    let depth = Atomic<Int>(0)
}

/// The records of every thread that has read a `ReadMostly` cell, and how readers and writers
/// are ordered. One per process.
final class Readers: @unchecked Sendable {  // `records` is guarded by `mutex` (a raw pthread mutex: fork handlers take it)
    static let shared = Readers(membarrier: true)

    /// The thread-specific slot holding a thread's record (+1), released when the thread exits.
    let key: pthread_key_t
    /// true: writers order readers with membarrier; false: readers and writers fence.
    let expedited: Bool
    /// membarrier(2)'s commands: registering once lets the process use the private expedited
    /// barrier, which makes every running thread of the process execute a full memory barrier
    /// before the call returns.
    private static let registerPrivateExpedited: Int32 = 16, privateExpedited: Int32 = 8
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var records: [ReaderRecord] = []

    /// `membarrier`: false makes readers fence even where membarrier works (tests). The
    /// shared instance's records are dropped as their threads exit; another instance's stay.
    init(membarrier: Bool) {
        var key = pthread_key_t()
        pthread_key_create(&key) { record in
            guard let record else { return }
            let r = Unmanaged<ReaderRecord>.fromOpaque(record).takeRetainedValue()
            Readers.shared.unregister(r)
        }
        self.key = key
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        // Registered before any cell exists, so no reader ever ran without the mode it needs.
        expedited = membarrier && csystem_membarrier(Readers.registerPrivateExpedited) == 0
        // A child of fork has one thread: the others' records go (one of them could have been
        // reading at the fork, and would hold up every writer of the child).
        if membarrier {
            pthread_atfork({ Readers.shared.lockForFork() }, { Readers.shared.unlockAfterFork(child: false) },
                           { Readers.shared.unlockAfterFork(child: true) })
        }
    }

    @inline(__always)
    func enter() -> Unmanaged<ReaderRecord> {
        let record = pthread_getspecific(key).map { Unmanaged<ReaderRecord>.fromOpaque($0) } ?? register()
        record._withUnsafeGuaranteedRef { r in
            let depth = r.depth.load(ordering: .relaxed)
            r.depth.store(depth &+ 1, ordering: .relaxed)
            if depth == 0 { r.sequence.store(r.sequence.load(ordering: .relaxed) &+ 1, ordering: .relaxed) }
        }
        if expedited { csystem_compiler_barrier() } else { atomicMemoryFence(ordering: .sequentiallyConsistent) }
        return record
    }

    @inline(__always)
    func leave(_ record: Unmanaged<ReaderRecord>) {
        record._withUnsafeGuaranteedRef { r in
            let depth = r.depth.load(ordering: .relaxed) &- 1
            r.depth.store(depth, ordering: .relaxed)
            if depth == 0 { r.sequence.store(r.sequence.load(ordering: .relaxed) &+ 1, ordering: .releasing) }
        }
    }

    /// This thread's first read: a record, kept in the registry and the thread's slot.
    @inline(never)
    private func register() -> Unmanaged<ReaderRecord> {
        let record = ReaderRecord()
        pthread_mutex_lock(mutex)
        records.append(record)
        pthread_mutex_unlock(mutex)
        let retained = Unmanaged.passRetained(record)
        pthread_setspecific(key, retained.toOpaque())
        return retained
    }

    private func unregister(_ record: ReaderRecord) {
        pthread_mutex_lock(mutex)
        records.removeAll { $0 === record }
        pthread_mutex_unlock(mutex)
    }

    /// The grace period: returns once every read that began before the call has ended. false
    /// if the barrier failed (the caller must then keep what it replaced).
    func waitForReaders() -> Bool {
        if expedited {
            guard csystem_membarrier(Readers.privateExpedited) == 0 else { return false }
        } else {
            atomicMemoryFence(ordering: .sequentiallyConsistent)
        }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        for record in records {
            let seen = record.sequence.load(ordering: .acquiring)
            guard seen & 1 == 1 else { continue }
            while record.sequence.load(ordering: .acquiring) == seen { sched_yield() }
        }
        return true
    }

    private func lockForFork() { pthread_mutex_lock(mutex) }

    private func unlockAfterFork(child: Bool) {
        if child {
            let mine = pthread_getspecific(key).map { Unmanaged<ReaderRecord>.fromOpaque($0).takeUnretainedValue() }
            records.removeAll { $0 !== mine }
        }
        pthread_mutex_unlock(mutex)
    }
}
