import Glibc
import Testing
@testable import AssetPatchCore

/// The publish sequence `assetpatch publish` runs, called directly.
@Suite struct PublisherTests {
    @Test func publishesInOrderAndRefusesWhatClientsWouldRefuse() throws {
        let src = TempDir(), repo = TempDir()
        defer { src.cleanup(); repo.cleanup() }
        try src.write("a.txt", "one")
        try src.write("dir/b.bin", noise(5000))
        var r = PublishRequest(source: src.path, repo: repo.path)
        r.package = "pub"
        let first = try Publisher.publish(r)
        #expect(first.manifest.version == 1 && first.manifest.files.map(\.path) == ["a.txt", "dir/b.bin", IndexLocation.entryName])
        #expect(first.head.index != nil && first.head.files.isEmpty && FS.isRegularFile(repo.path + "/head.json"))
        #expect(try Digest.hexOfFile(repo.path + "/" + first.archivePath) == first.manifest.archiveDigest)
        #expect(try Publisher.currentManifest(repo: repo.path)?.version == 1)
        // The next version by default, and the package kept from the repository.
        r.package = nil
        let second = try Publisher.publish(r)
        #expect(second.manifest.version == 2 && second.manifest.package == "pub")
        r.version = 2
        #expect(statusOf { _ = try Publisher.publish(r) } == .argument, "not above the current version")
        r.version = nil
        r.archiveURLBase = "ftp://host/x/"
        #expect(statusOf { _ = try Publisher.publish(r) } == .argument)
        r.archiveURLBase = "https://cdn.example/assets"
        let third = try Publisher.publish(r)
        #expect(third.manifest.archiveURL == "https://cdn.example/assets/\(third.manifest.archiveDigest).zip")
        r.archiveURLBase = nil
        r.plugins = [PluginDeclaration(name: "p", path: "a.txt", entry: "entry")]
        #expect(statusOf { _ = try Publisher.publish(r) } == .argument, "a.txt is not a shared object")
        r.plugins = []
        try src.write("bad\\name", "x")
        #expect(statusOf { _ = try Publisher.publish(r) } == .argument)
    }
}
