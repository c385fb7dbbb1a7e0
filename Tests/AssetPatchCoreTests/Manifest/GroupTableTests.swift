import Testing
@testable import AssetPatchCore

@Suite struct GroupTableTests {
    func file(_ path: String, _ size: UInt64, at offset: UInt64) -> ManifestFile {
        ManifestFile(path: path, size: size, sha256: String(repeating: "0", count: 64),
                     location: ArchiveLocation(headerOffset: offset, dataOffset: offset + 30 + UInt64(path.utf8.count), compressedSize: size, method: 0))
    }

    var files: [ManifestFile] {
        [file("a.png", 10, at: 0), file("a@2x.png", 40, at: 100), file("a@3x.png", 90, at: 200), file("levels/1/m", 7, at: 400),
         file("levels/2/m", 8, at: 500), file("readme", 3, at: 600)]
    }

    @Test func assignsFirstMatchingRuleThenScalesAndRoundTrips() throws {
        let rules = [GroupRule(name: "level1", delivery: .onDemand, patterns: ["levels/1/*"]),
                     GroupRule(name: "levels", delivery: .install, patterns: ["levels/*"])]
        let table = try #require(try GroupRule.assign(files, rules, scales: true))
        #expect(table.groups.map(\.name) == ["level1", "levels", "scale-1x", "scale-2x", "scale-3x"])
        #expect(table.fileGroups == [3, 4, 5, 1, 2, 0])
        let level1 = table.groups[0]
        #expect(level1.files == 1 && level1.size == 7 && level1.storedBytes == 30 + 10 + 7)
        let decoded = try GroupTable.decode(table.encode(), files: files.count, source: "t")
        #expect(decoded == table)
        var numbered = files
        for i in numbered.indices { numbered[i].group = table.fileGroups[i] }
        try decoded.check(numbered, source: "t")
    }

    @Test func aRuleMatchingNothingOrANameTwiceIsRefused() throws {
        #expect(throws: AssetPatchError.self) { try GroupRule.assign(files, [GroupRule(name: "x", delivery: .onDemand, patterns: ["nope/*"])], scales: false) }
        let twice = [GroupRule(name: "x", delivery: .onDemand, patterns: ["a*"]), GroupRule(name: "x", delivery: .install, patterns: ["r*"])]
        #expect(throws: AssetPatchError.self) { try GroupRule.assign(files, twice, scales: false) }
        #expect(throws: AssetPatchError.self) { try GroupRule.assign(files, [GroupRule(name: "../x", delivery: .onDemand, patterns: ["a*"])], scales: false) }
        #expect(try GroupRule.assign(files, [], scales: false) == nil)
    }

    @Test func scalesAreReadFromTheStem() {
        #expect(GroupRule.scale(of: "ui/icon@3x.png") == 3)
        #expect(GroupRule.scale(of: "ui/icon@2x") == 2)
        #expect(GroupRule.scale(of: "ui/icon@x.png") == nil)
        #expect(GroupRule.scale(of: "ui@3x/icon.png") == nil)
        #expect(GroupRule.scale(of: "ui/icon.png") == nil)
    }

    /// A page that breaks a rule: runs short of or past the files, a group number past the
    /// groups, a name repeated or unsafe, a delivery unknown, bytes after the runs.
    @Test func malformedPagesAreRefused() throws {
        let good = GroupTable(groups: [ReleaseGroup(name: "g", delivery: .onDemand, files: 1, size: 7, storedBytes: 38)],
                              fileGroups: [0, 1, 0])
        _ = try GroupTable.decode(good.encode(), files: 3, source: "t")
        #expect(throws: AssetPatchError.self) { try GroupTable.decode(good.encode(), files: 4, source: "t") }
        #expect(throws: AssetPatchError.self) { try GroupTable.decode(good.encode(), files: 2, source: "t") }
        #expect(throws: AssetPatchError.self) { try GroupTable.decode(good.encode() + [0], files: 3, source: "t") }
        var past = good
        past.fileGroups = [0, 2, 0]
        #expect(throws: AssetPatchError.self) { try GroupTable.decode(past.encode(), files: 3, source: "t") }
        var twice = good
        twice.groups.append(twice.groups[0])
        #expect(throws: AssetPatchError.self) { try GroupTable.decode(twice.encode(), files: 3, source: "t") }
        var unsafe = good
        unsafe.groups[0].name = "a/b"
        #expect(throws: AssetPatchError.self) { try GroupTable.decode(unsafe.encode(), files: 3, source: "t") }
        var delivery = good.encode()
        delivery[5 + 1 + 1 + 1] = 7  // magic, kind, count, name length, name, then the delivery byte
        #expect(throws: AssetPatchError.self) { try GroupTable.decode(delivery, files: 3, source: "t") }
        // Counts that are not what the files add up to.
        var lying = good
        lying.groups[0].size = 8
        let decoded = try GroupTable.decode(lying.encode(), files: 3, source: "t")
        let three = [file("a", 1, at: 0), file("b", 7, at: 100), file("c", 1, at: 200)]
        #expect(throws: AssetPatchError.self) { try decoded.check(three, source: "t") }
        try GroupTable.decode(good.encode(), files: 3, source: "t").check(three, source: "t")
        // Sizes near 2^64 (a signed but careless page): refused, never a trap.
        var huge = good
        huge.groups[0].size = UInt64(Int64.max) + 1
        #expect(throws: AssetPatchError.self) { try GroupTable.decode(huge.encode(), files: 3, source: "t") }
        func deflated(_ path: String, at offset: UInt64) -> ManifestFile {
            ManifestFile(path: path, size: UInt64(Int64.max), sha256: String(repeating: "0", count: 64),
                         location: ArchiveLocation(headerOffset: offset, dataOffset: offset + 31, compressedSize: 5, method: 8))
        }
        let big = [file("a", 1, at: 0), deflated("b", at: 100), deflated("c", at: 200)]
        let both = GroupTable(groups: [ReleaseGroup(name: "g", delivery: .onDemand, files: 2, size: 1, storedBytes: 1)], fileGroups: [0, 1, 1])
        #expect(throws: AssetPatchError.self) { try both.check(big, source: "t") }
    }
}
