import Testing
@testable import AssetPatchCore

/// A phase whose start and end carry the same numbers is reported once (the check, the
/// activation), every change of numbers still is.
@Suite struct ProgressReportTests {
    @Test func identicalReportsAreDeliveredOnce() {
        var seen: [Progress] = []
        let r = ProgressReporter({ seen.append($0); return false }, cancel: CancelToken())
        r.report(Progress(phase: .check))
        r.report(Progress(phase: .check), final: true)
        r.report(Progress(phase: .download, bytesDone: 0, bytesTotal: 10, filesTotal: 2))
        r.report(Progress(phase: .download, bytesDone: 10, bytesTotal: 10, filesDone: 2, filesTotal: 2), final: true)
        r.report(Progress(phase: .activate))
        r.report(Progress(phase: .activate), final: true)
        r.report(Progress(phase: .done), final: true)
        #expect(seen.map(\.phase) == [.check, .download, .download, .activate, .done])
    }
}
