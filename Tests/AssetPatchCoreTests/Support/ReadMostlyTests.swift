import Glibc
import Synchronization
import Testing
@testable import AssetPatchCore

/// The cell resolving reads: readers take no lock, and a value replaced is released only once
/// no reader can still be using it, with membarrier and with the fences used where it is missing.
@Suite struct ReadMostlyTests {
    /// A value that records its release; readers check they never hold a released one.
    final class Probe: @unchecked Sendable {  // `alive` is atomic
        let serial: Int
        let alive = Atomic<Bool>(true)
        init(_ serial: Int) { self.serial = serial }
        deinit { alive.store(false, ordering: .sequentiallyConsistent) }
    }

    /// What the threads of a test share.
    final class Shared: @unchecked Sendable {  // every field is atomic
        let stop = Atomic<Bool>(false), inside = Atomic<Bool>(false), swapped = Atomic<Bool>(false)
        let replaced = Atomic<Bool>(false), sawAlive = Atomic<Bool>(false), replacedWhileReading = Atomic<Bool>(true)
        let bad = Atomic<Int>(0), reads = Atomic<Int>(0), newest = Atomic<Int>(0)
    }

    static let modes = [Readers.shared, Readers(membarrier: false)]

    @Test(arguments: [0, 1])
    func noReaderEverHoldsAReleasedValue(mode: Int) throws {
        let cell = ReadMostly(Probe(0), readers: ReadMostlyTests.modes[mode])
        let s = Shared()
        var threads: [pthread_t] = []
        for _ in 0..<3 {
            threads.append(try startThread {
                while !s.stop.load(ordering: .relaxed) {
                    let ok = cell.read { p -> Bool in
                        // Long enough reads that a swap lands inside some of them.
                        var spin = 0
                        for i in 0..<200 { spin &+= i }
                        return spin > 0 && p.alive.load(ordering: .sequentiallyConsistent)
                            && p.serial <= s.newest.load(ordering: .acquiring)
                    }
                    if !ok { s.bad.add(1, ordering: .relaxed) }
                    s.reads.add(1, ordering: .relaxed)
                }
            })
        }
        // Every reader under way before the first swap, and reads between the swaps.
        while s.reads.load(ordering: .relaxed) < 300 { sched_yield() }
        for serial in 1...300 {
            let before = s.reads.load(ordering: .relaxed)
            while s.reads.load(ordering: .relaxed) < before + 3 { sched_yield() }
            s.newest.store(serial, ordering: .releasing)
            cell.replace { _ in Probe(serial) }
        }
        s.stop.store(true, ordering: .relaxed)
        for t in threads { pthread_join(t, nil) }
        let bad = s.bad.load(ordering: .relaxed), reads = s.reads.load(ordering: .relaxed)
        #expect(bad == 0)
        #expect(reads > 0)
        #expect(cell.read { $0.serial } == 300)
    }

    @Test(arguments: [0, 1])
    func aReplaceWaitsForTheReaderStillUsingTheOldValue(mode: Int) throws {
        let cell = ReadMostly(Probe(0), readers: ReadMostlyTests.modes[mode])
        let s = Shared()
        let reader = try startThread {
            cell.read { old in
                s.inside.store(true, ordering: .releasing)
                while !s.swapped.load(ordering: .acquiring) { sched_yield() }
                // The writer has made the new value; give it time to (wrongly) release this one.
                usleep(50_000)
                s.sawAlive.store(old.alive.load(ordering: .sequentiallyConsistent), ordering: .relaxed)
                s.replacedWhileReading.store(s.replaced.load(ordering: .acquiring), ordering: .relaxed)
            }
        }
        while !s.inside.load(ordering: .acquiring) { sched_yield() }
        let writer = try startThread {
            cell.replace { _ in
                s.swapped.store(true, ordering: .releasing)
                return Probe(1)
            }
            s.replaced.store(true, ordering: .releasing)
        }
        pthread_join(reader, nil)
        pthread_join(writer, nil)
        let sawAlive = s.sawAlive.load(ordering: .relaxed), early = s.replacedWhileReading.load(ordering: .relaxed)
        #expect(sawAlive, "the old value was released under its reader")
        #expect(!early, "replace returned while a reader held the old value")
        #expect(cell.read { $0.serial } == 1)
    }

    @Test func readsNestAndThreadsComeAndGo() throws {
        let a = ReadMostly(Probe(1)), b = ReadMostly(Probe(2))
        #expect(a.read { x in b.read { y in x.serial + y.serial } } == 3)
        // Threads that read once and exit leave no record behind that a writer would wait on.
        for _ in 0..<50 {
            let t = try startThread { _ = a.read { $0.serial } }
            pthread_join(t, nil)
        }
        a.replace { _ in Probe(3) }
        #expect(a.read { $0.serial } == 3)
    }
}
