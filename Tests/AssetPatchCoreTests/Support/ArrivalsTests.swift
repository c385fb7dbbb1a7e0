import Glibc
import Testing
@testable import AssetPatchCore

@Suite struct ArrivalsTests {
    /// A wait ends with the first of its keys another thread puts, or with nil once the table is
    /// closed; keys there before the wait answer at once.
    @Test func aWaitEndsWithWhatArrivesOrNilOnceClosed() throws {
        let table = Arrivals(["kept": 1])
        #expect(try table.wait(forAny: ["other", "kept"], cancel: CancelToken())! == ("kept", 1))
        let stop = CancelToken()
        let got = try alongside({
            table.put("unrelated", 2)
            table.put("late", 3)
        }, stopping: stop) { try table.wait(forAny: ["late"], cancel: CancelToken()) }
        #expect(got! == ("late", 3))
        let closed = try alongside({ table.close() }, stopping: stop) { try table.wait(forAny: ["never"], cancel: CancelToken()) }
        #expect(closed == nil)
        #expect(table.all == ["kept": 1, "unrelated": 2, "late": 3])
    }

    /// A cancel ends a wait that nothing would end (the fetch beside it failed), and is told
    /// before a closed table's nil: work stopped by a failed fetch is not told a chunk never came.
    @Test func aCancelEndsAWait() throws {
        let table = Arrivals<String, Int>()
        let cancel = CancelToken()
        let stop = CancelToken()
        #expect(throws: AssetPatchError.self) {
            try alongside({ usleep(10_000); cancel.cancel() }, stopping: stop) { try table.wait(forAny: ["never"], cancel: cancel) }
        }
        table.close()
        #expect(throws: AssetPatchError.self) { try table.wait(forAny: ["never"], cancel: cancel) }
        #expect(try table.wait(forAny: ["never"], cancel: CancelToken()) == nil)
    }
}
