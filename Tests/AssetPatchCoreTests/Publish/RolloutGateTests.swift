import Testing
@testable import AssetPatchCore

/// The gate's counting and its decisions at their boundaries: exactly min_devices, a rate
/// exactly at its threshold, an early halt, events of other releases, duplicates.
@Suite struct RolloutGateTests {
    /// One event line as clients write them.
    func event(_ kind: String, device: Int, version: Int64 = 3, channel: String = "stable", package: String = "game",
               _ extra: String = "") -> String {
        #"{"seq":1,"event":"\#(kind)","package":"\#(package)","channel":"\#(channel)","version":\#(version),"device":"d\#(device)"\#(extra)}"#
    }

    func counts(_ lines: [String]) throws -> RolloutCounts {
        try RolloutCounts.count([("events", Array(lines.joined(separator: "\n").utf8))], package: "game", channel: "stable", version: 3)
    }

    /// `good` devices that confirmed, `crashed` that rolled back after a crash loop.
    func fleet(good: Int, crashed: Int) -> [String] {
        var lines: [String] = []
        for d in 0..<(good + crashed) {
            lines.append(event("activate", device: d))
            lines.append(d < good ? event("marked_good", device: d) : event("rollback", device: d, #","cause":"crash_loop","to":2"#))
        }
        return lines
    }

    let policy = RolloutPolicy(steps: [1, 5, 25, 100], minDevices: 50, maxCrashLoopRate: 0.02, maxRollbackRate: 0.05)

    @Test func countsEachDeviceOnceAndOnlyThisRelease() throws {
        var lines = fleet(good: 3, crashed: 1)
        lines += fleet(good: 3, crashed: 1)  // delivered twice: the same devices
        lines.append(event("rollback", device: 90, version: 2, #","cause":"crash_loop""#))
        lines.append(event("rollback", device: 91, channel: "beta", #","cause":"crash_loop""#))
        lines.append(event("rollback", device: 92, package: "other", #","cause":"crash_loop""#))
        lines.append(event("rollback", device: 93, #","cause":"app_upgrade""#))
        lines.append(event("install", device: 94, #","result":"err_integrity""#))
        lines.append(event("install", device: 95, #","result":"err_io""#))
        lines.append(event("install", device: 95, #","result":"ok""#))  // it installed in the end
        lines.append(event("install", device: 96, #","result":"err_cancelled""#))
        lines.append(event("check", device: 97, #","result":"ok","rollout":{"basis_points":100,"bucket":5000,"taken":false}"#))
        lines.append(event("check", device: 98, #","result":"ok","rollout":{"basis_points":100,"bucket":5,"taken":true}"#))
        let c = try counts(lines)
        #expect(c.activated == 4 && c.markedGood == 3 && c.crashLoops == 1 && c.rollbacks == 1 && c.settled == 4)
        #expect(c.installed == 1 && c.installFailed == 1 && c.offered == 1)
        #expect(c.otherEvents == 3 && c.events == lines.count)
    }

    @Test func refusesAHalfReadExport() throws {
        let bytes = Array((event("activate", device: 1) + "\n{\"seq\":2,\"ev").utf8)
        #expect(statusOf { _ = try RolloutCounts.count([("export.jsonl", bytes)], package: "game", channel: "stable", version: 3) } == .argument)
    }

    @Test func advancesOnlyWithMinDevicesSettled() throws {
        let below = RolloutGate.decide(policy, current: 1, counts: try counts(fleet(good: 49, crashed: 0)))
        #expect(below.action == .hold && below.to == nil)
        let at = RolloutGate.decide(policy, current: 1, counts: try counts(fleet(good: 50, crashed: 0)))
        #expect(at.action == .advance && at.to == 5)
        // Activated but not settled yet: no verdict.
        var lines = fleet(good: 10, crashed: 0)
        for d in 100..<200 { lines.append(event("activate", device: d)) }
        #expect(RolloutGate.decide(policy, current: 1, counts: try counts(lines)).action == .hold)
        #expect(RolloutGate.decide(policy, current: 25, counts: try counts(fleet(good: 60, crashed: 0))).to == 100)
    }

    @Test func aRateAtItsThresholdPassesAndAboveItHalts() throws {
        // 2 of 100 is 2%: at the threshold, not over it.
        let at = RolloutGate.decide(policy, current: 5, counts: try counts(fleet(good: 98, crashed: 2)))
        #expect(at.action == .advance && at.to == 25)
        let over = RolloutGate.decide(policy, current: 5, counts: try counts(fleet(good: 97, crashed: 3)))
        #expect(over.action == .halt && over.to == 0 && over.reasons.first?.contains("crash_loop_rate 3.0%") == true)
    }

    @Test func haltsEarlyWhenFailuresAloneCrossTheThreshold() throws {
        // max 2% of min_devices 50 is 1 device: a second crash loop halts with 10 devices settled.
        let one = RolloutGate.decide(policy, current: 1, counts: try counts(fleet(good: 9, crashed: 1)))
        #expect(one.action == .hold)
        let two = RolloutGate.decide(policy, current: 1, counts: try counts(fleet(good: 8, crashed: 2)))
        #expect(two.action == .halt)
    }

    @Test func anAdvanceNeedsItsDevicesAtTheShareInForce() throws {
        let c = try counts(fleet(good: 60, crashed: 0))
        #expect(RolloutGate.decide(policy, current: 5, counts: c, settledAtStep: 49).action == .hold)
        #expect(RolloutGate.decide(policy, current: 5, counts: c, settledAtStep: 50).to == 25)
    }

    @Test func theEarlyHaltIsExactAtItsBoundary() throws {
        // 29 failures of min_devices 100 is exactly 29%: not over a 29% threshold (0.29 * 100 is
        // 28.999... in binary: compared as failures / min_devices).
        let strict = RolloutPolicy(steps: [1, 100], minDevices: 100, maxCrashLoopRate: 0.29, maxRollbackRate: 1)
        #expect(RolloutGate.decide(strict, current: 1, counts: try counts(fleet(good: 21, crashed: 29))).action == .hold)
        #expect(RolloutGate.decide(strict, current: 1, counts: try counts(fleet(good: 20, crashed: 30))).action == .halt)
    }

    @Test func nothingToDoWhenCompleteOrHalted() throws {
        let c = try counts(fleet(good: 100, crashed: 0))
        #expect(RolloutGate.decide(policy, current: nil, counts: c).action == .complete)
        #expect(RolloutGate.decide(policy, current: 100, counts: c).action == .complete)
        #expect(RolloutGate.decide(policy, current: 0, counts: c).action == .halted)
    }

    @Test func policyIsCheckedStrictly() throws {
        func decode(_ s: String) -> Status? { statusOf { _ = try RolloutPolicy.decode(Array(s.utf8), source: "p") } }
        #expect(decode(#"{"steps":[1,5,100],"min_devices":10,"max_crash_loop_rate":0.01}"#) == nil)
        #expect(decode(#"{"steps":[5,1,100]}"#) == .argument)
        #expect(decode(#"{"steps":[1,5]}"#) == .argument)
        #expect(decode(#"{"steps":[0,100]}"#) == .argument)
        #expect(decode(#"{"max_crash_loop_rate":2}"#) == .argument)
        #expect(decode(#"{"min_devices":0}"#) == .argument)
        #expect(decode(#"{"max_crash_rate":0.1}"#) == .argument, "a misspelt threshold is not ignored")
    }
}
