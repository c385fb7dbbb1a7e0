import Testing
@testable import AssetPatchCore

@Suite struct InstalledFilesTests {
    /// Digests that differ in the high word as well as the low one.
    private func digest(_ i: Int) -> Sha256 {
        Sha256(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 == 31 ? i : $0 == 30 ? i >> 8 : ($0 * 31 + i * 17) % 256) })!
    }

    @Test func theFirstReleaseGivenForADigestIsTheOneTaken() {
        var files = InstalledFiles()
        // The active release first, then a kept one holding the same contents and some others,
        // given in no order.
        for i in stride(from: 999, through: 0, by: -3) { files.append(digest(i), InstalledFile(root: "/active/", path: "f\(i)", size: UInt64(i))) }
        // Not found before it is sealed; a release listing a content twice keeps the first.
        #expect(files[digest(999)] == nil)
        files.append(digest(999), InstalledFile(root: "/active/", path: "again", size: 999))
        files.seal()
        #expect(files.count == 334)
        for i in 0..<1000 { files.append(digest(i), InstalledFile(root: "/kept/", path: "f\(i)", size: UInt64(i))) }
        #expect(files.count == 1000, "the kept release added its own contents only")
        files.seal()
        #expect(files.count == 1000)
        for i in 0..<1000 {
            #expect(files[digest(i)] == InstalledFile(root: i % 3 == 0 ? "/active/" : "/kept/", path: "f\(i)", size: UInt64(i)))
        }
        #expect(files[digest(1000)] == nil && files[digest(-1)] == nil)
        #expect(InstalledFiles.empty[digest(0)] == nil)
    }
}
