import Glibc
internal import CSystem

/// A value behind a pthread mutex on the C heap. The standard library's `Mutex` locks with
/// futex system calls that ThreadSanitizer does not see, so it reported the client's guarded
/// state as racing; pthread locks it understands, at the same cost uncontended.
final class Locked<Value>: @unchecked Sendable {  // `value` is only touched with the mutex held
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// A pthread mutex + condition variable on the C heap (pthread objects must not move).
/// Used where a thread must sleep until another signals; plain shared state uses `Locked`.
final class Condition: @unchecked Sendable {  // all access goes through the pthread mutex
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        cond = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    func locked<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    func broadcast() { pthread_cond_broadcast(cond) }

    /// Waits (mutex held) until signalled or `deadlineMs` (monotonic) passes; nil waits forever.
    func wait(until deadlineMs: UInt64?) {
        guard let deadlineMs else {
            pthread_cond_wait(cond, mutex)
            return
        }
        var ts = timespec(tv_sec: Int(deadlineMs / 1000), tv_nsec: Int(deadlineMs % 1000) * 1_000_000)
        pthread_cond_timedwait(cond, mutex, &ts)
    }
}

private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// Starts a joinable pthread running `body`.
func startThread(_ body: @escaping () -> Void) throws -> pthread_t {
    var tid = pthread_t()
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    let rc = pthread_create(&tid, nil, { arg in
        guard let arg else { return nil }
        Unmanaged<ThreadBody>.fromOpaque(arg).takeRetainedValue().run()
        return nil
    }, box)
    if rc != 0 {
        Unmanaged<ThreadBody>.fromOpaque(box).release()
        throw AssetPatchError(.internal, "pthread_create: \(errnoText(rc))")
    }
    return tid
}

/// Runs `body` on a new detached thread: blocking work started from async code (an update
/// blocks for seconds) must not hold one of the few threads of Swift's cooperative pool.
package func detachThread(_ body: @escaping @Sendable () -> Void) throws {
    pthread_detach(try startThread(body))
}

/// Runs `side` on a new thread while `main` runs on this one; returns `main`'s result once
/// both are done. When `main` throws, `stop` is cancelled (`side` must check it), `side` is
/// waited for and `main`'s error thrown; otherwise `side`'s error, if it threw. A thread that
/// can't be started runs `side` here, after `main`.
func alongside<T>(_ side: @escaping () throws -> Void, stopping stop: CancelToken, _ main: () throws -> T) throws -> T {
    let failure = Locked<Error?>(nil)
    let run = {
        do { try side() } catch { failure.withLock { $0 = error } }
    }
    guard let thread = try? startThread(run) else {
        let result = try main()
        try side()
        return result
    }
    let result: T
    do {
        result = try main()
    } catch {
        stop.cancel()
        pthread_join(thread, nil)
        throw error
    }
    pthread_join(thread, nil)
    if let error = failure.withLock({ $0 }) { throw error }
    return result
}

/// The processors this process may run on: its CPU affinity, as `nproc` counts them (a
/// container or `taskset` can allow fewer than the machine has online).
package func availableProcessors() -> Int {
    let allowed = Int(csystem_allowed_cpus())
    return allowed > 0 ? allowed : max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
}

/// Calls `body` with each of `0..<count`, on this thread and up to `threads - 1` more, each
/// taking the next index when it is done with one; returns once every call has. After a call
/// throws, no further index is taken, and the first error is thrown. `body` must be safe to run
/// on several threads at once; threads that can't be started leave their share to the others.
func parallelForEach(_ count: Int, threads: Int, _ body: (Int) throws -> Void) throws {
    let next = Locked(0)
    let failure = Locked<Error?>(nil)
    try withoutActuallyEscaping(body) { body in
        let work = {
            while failure.withLock({ $0 == nil }) {
                let i = next.withLock { i in defer { i += 1 }; return i }
                guard i < count else { return }
                do { try body(i) } catch { failure.withLock { if $0 == nil { $0 = error } } }
            }
        }
        var started: [pthread_t] = []
        for _ in 1..<max(1, min(threads, count)) {
            guard let t = try? startThread(work) else { break }
            started.append(t)
        }
        work()
        for t in started { pthread_join(t, nil) }
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
