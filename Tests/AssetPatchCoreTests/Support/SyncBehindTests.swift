import Glibc
import Testing
@testable import AssetPatchCore

/// Files made durable behind the work that completes them: every file handed over is synced
/// by `finish`, known afterwards by identity wherever a rename or link puts it, and only while
/// it is the same file; a failed sync is never lost.
@Suite struct SyncBehindTests {
    @Test func everyFileHandedOverIsSyncedAndKnownThroughRenamesAndLinks() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let sync = SyncBehind()
        // More than a slice of descriptors, handed over from two threads at once.
        let count = SyncBehind.slice * 2 + 37
        for i in 0..<count { try dir.write("f/\(i)", noise(100 + i, seed: UInt64(i + 1))) }
        try parallelForEach(count, threads: 2) { i in sync.submit(dir.path + "/f/\(i)") }
        let synced = try sync.finish()
        #expect(synced.count == count)
        for i in 0..<count { #expect(FileIdentity(path: dir.path + "/f/\(i)").map(synced.contains) == true, "f/\(i)") }

        try FS.makeDirectories(dir.path + "/release")
        try FS.rename(dir.path + "/f/0", dir.path + "/release/moved")
        #expect(link(dir.path + "/f/1", dir.path + "/release/linked") == 0)
        #expect(FileIdentity(path: dir.path + "/release/moved").map(synced.contains) == true)
        #expect(FileIdentity(path: dir.path + "/release/linked").map(synced.contains) == true)
        // Handed over after finish: ignored, not synced.
        try dir.write("late", "bytes")
        sync.submit(dir.path + "/late")
        #expect(try sync.finish() == synced)
        #expect(FileIdentity(path: dir.path + "/late").map(synced.contains) == false)
    }

    @Test func submittersWaitWhileTheMostFilesWaitForASyncAndNothingIsLost() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let sync = SyncBehind()
        // A FIFO first: the sync thread's open of it waits for a writer, so no round ends
        // until the test opens one, however fast the thread is.
        let fifo = dir.path + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        sync.submit(fifo)
        for i in 0..<8 { try dir.write("f/\(i)", noise(10 + i, seed: UInt64(i + 1))) }
        // Three times the bound, from another thread (which waits while the bound is reached).
        let total = SyncBehind.maxWaiting * 3
        let done = Locked(false)
        let submitter = try startThread {
            for i in 0..<total { sync.submit(dir.path + "/f/\(i % 8)", waiting: true) }
            done.withLock { $0 = true }
        }
        // Until the submitter waits at the bound or, without one, has handed over everything.
        var waited = 0
        while sync.mostWaiting < SyncBehind.maxWaiting && !done.withLock({ $0 }) && waited < 120_000 {
            usleep(1000)
            waited += 1
        }
        #expect(!done.withLock { $0 }, "every file was handed over while the sync thread was held")
        let writer = Glibc.open(fifo, O_WRONLY)  // releases the sync thread
        #expect(writer >= 0)
        pthread_join(submitter, nil)
        close(writer)
        let synced = try sync.finish()
        // Reached, and never passed.
        #expect(sync.mostWaiting == SyncBehind.maxWaiting)
        #expect(synced == Set((0..<8).compactMap { FileIdentity(path: dir.path + "/f/\($0)") }))
    }

    @Test func aFileWrittenAgainOrAnotherAtTheSamePathIsNotKnown() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try dir.write("a", noise(4096, seed: 1))
        try dir.write("b", noise(4096, seed: 2))
        let sync = SyncBehind()
        sync.submit(dir.path + "/a")
        sync.submit(dir.path + "/b")
        let synced = try sync.finish()
        #expect(synced.count == 2)
        // Another file of the same size at a's path (a's inode still linked, so not reused).
        #expect(link(dir.path + "/a", dir.path + "/a.kept") == 0)
        try FS.unlink(dir.path + "/a")
        try dir.write("a", noise(4096, seed: 3))
        #expect(FileIdentity(path: dir.path + "/a").map(synced.contains) == false)
        #expect(FileIdentity(path: dir.path + "/a.kept").map(synced.contains) == true)
        // b written again in place, to the same size: its time moves on.
        var st = stat()
        #expect(stat(dir.path + "/b", &st) == 0)
        var times = [st.st_atim, timespec(tv_sec: st.st_mtim.tv_sec + 1, tv_nsec: st.st_mtim.tv_nsec)]
        let f = try File.open(dir.path + "/b", O_WRONLY)
        try f.pwrite([9], at: 0)
        #expect(futimens(f.fd, &times) == 0)
        #expect(FileIdentity(path: dir.path + "/b").map(synced.contains) == false)
    }

    @Test func aFailedSyncIsThrownByFinishEveryTime() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try dir.write("ok", "bytes")
        let sync = SyncBehind()
        sync.submit("/proc/self/status")  // a regular file that fdatasync refuses (EINVAL)
        sync.submit(dir.path + "/ok")
        #expect(statusOf { _ = try sync.finish() } == .io)
        // Thrown again: the failure is not consumed by the first call.
        #expect(statusOf { _ = try sync.finish() } == .io)
    }

    @Test func nothingHandedOverSyncsNothingAndAnInjectedFaultStandsForTheSet() throws {
        defer { FaultInjection.clear() }
        FaultInjection.fail("fdatasync", errno: EIO)
        #expect(try SyncBehind().finish().isEmpty)
        let dir = TempDir()
        defer { dir.cleanup() }
        try dir.write("x", "bytes")
        let sync = SyncBehind()
        sync.submit(dir.path + "/x")
        #expect(statusOf { _ = try sync.finish() } == .io)
    }
}
