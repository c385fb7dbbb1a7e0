import Dispatch
import Glibc
import Testing
@testable import AssetPatchKit
@testable import AssetPatchCore

/// The Swift API's error (the core has its own of the same name).
typealias KitError = AssetPatchKit.AssetPatchError

/// A directory under /tmp for one test, removed by `cleanup()`.
private struct Scratch {
    let path: String

    init() {
        var template = Array("/tmp/assetpatch-kit.XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    func cleanup() { try? FS.removeTree(path) }

    /// Writes `files` as a release of `version` into `repo` (a real archive, per-file
    /// locations, as `assetpatch publish` writes it) and returns its manifest's file:// URL.
    func publish(_ files: [(String, [UInt8])], version: Int64, repo: String = "repo") throws -> String {
        let src = path + "/src-\(version)", dir = path + "/" + repo
        try FS.makeDirectories(dir + "/archives")
        let zip = ZipWriter.self
        let w = try zip.init(path: dir + "/archives/tmp.zip")
        var entries: [ManifestFile] = []
        for (name, bytes) in files {
            try FS.makeDirectories(FS.parent(of: src + "/" + name))
            try File.open(src + "/" + name, O_WRONLY | O_CREAT | O_TRUNC).write(bytes)
            entries.append(try w.add(name: name, sourcePath: src + "/" + name))
        }
        try w.finish()
        let sha = try Digest.hexOfFile(dir + "/archives/tmp.zip")
        try FS.rename(dir + "/archives/tmp.zip", dir + "/archives/\(sha).zip")
        let m = Manifest(kind: .format1, package: "kit", version: version, label: "v\(version)", created: nil, expires: nil,
                         minAppVersion: nil, archiveURL: "archives/\(sha).zip", archiveSize: FS.fileSize(dir + "/archives/\(sha).zip"),
                         archiveDigest: sha, files: entries, plugins: [], signatureVerified: false, payload: [])
        try FS.writeAtomically(dir + "/manifest.json", Array(m.toJSON().serialized().utf8))
        return URLs.fileURL(forPath: dir + "/manifest.json")
    }
}

/// Bytes that do not compress, so an archive of them takes a while to copy.
private func noise(_ count: Int, seed: UInt64) -> [UInt8] {
    var x = seed | 1
    return (0..<count).map { _ in
        x ^= x << 13; x ^= x >> 7; x ^= x << 17
        return UInt8(truncatingIfNeeded: x)
    }
}

private func contents(_ path: String) throws -> [UInt8] { try FS.readFile(path) }

/// Collects values from the update's thread.
private final class Recorder<T: Sendable>: Sendable {
    private let items = Locked<[T]>([])
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var all: [T] { items.withLock { $0 } }
}

@Suite struct AssetPatchKitTests {
    @Test func updatesResolvesAndReportsProgressInOrder() async throws {
        let s = Scratch()
        defer { s.cleanup() }
        try FS.makeDirectories(s.path + "/bundle/img")
        try File.open(s.path + "/bundle/img/logo.png", O_WRONLY | O_CREAT).write(Array("bundle logo".utf8))
        let deep = (0..<6).map { _ in String(repeating: "d", count: 200) }.joined(separator: "/") + "/deep.txt"
        try FS.makeDirectories(FS.parent(of: s.path + "/bundle/" + deep))
        try File.open(s.path + "/bundle/" + deep, O_WRONLY | O_CREAT).write(Array("deep".utf8))
        let url = try s.publish([("img/logo@2x.png", Array("release logo 2x".utf8)), ("data/level1.json", Array("{}".utf8))], version: 1)

        let client = try AssetPatchClient(dataDirectory: s.path + "/data", bundleDirectory: s.path + "/bundle",
                                          options: .init(manifestURL: url, variants: ["@2x", ""]))
        #expect(client.currentVersion == 0)
        #expect(try contents(client.resolve("img/logo.png")) == Array("bundle logo".utf8))
        #expect(try client.resolve(deep) == s.path + "/bundle/" + deep, "a path longer than the first buffer")
        let available = try #require(try await client.check())
        let archive = FS.fileSize(s.path + "/repo/archives/" + (try FS.list(s.path + "/repo/archives")).first!)!
        #expect(available.version == 1 && available.downloadBytes > 0 && available.downloadBytes <= archive)

        let seen = Recorder<UpdateProgress>()
        #expect(try await client.update { seen.append($0) })
        #expect(client.currentVersion == 1)
        let (path, variant) = try client.resolveVariant("img/logo.png")
        #expect(try contents(path) == Array("release logo 2x".utf8) && variant == 0)
        #expect(try contents(client.resolve("data/level1.json")) == Array("{}".utf8))

        let events = seen.all
        #expect(events.first?.phase == .check && events.last?.phase == .done)
        #expect(events.map(\.phase) == events.map(\.phase).sorted(), "phases only move forward")
        for (a, b) in zip(events, events.dropFirst()) where a.phase == b.phase {
            #expect(a.bytesDone <= b.bytesDone, "bytes never go back within \(a.phase)")
        }
        #expect(Set(events.map(\.phase)).isSuperset(of: [.check, .download, .install, .activate, .done]))
        #expect(try await client.update() == false, "already current")
        #expect(try await client.check() == nil)
    }

    @Test func cancellingTheTaskCancelsTheRunningUpdateAndKeepsWhatItDownloaded() async throws {
        let s = Scratch()
        defer { s.cleanup() }
        let url = try s.publish((0..<8).map { ("big/\($0).bin", noise(1 << 20, seed: UInt64($0 + 1))) }, version: 1)
        let client = try AssetPatchClient(dataDirectory: s.path + "/data", options: .init(manifestURL: url))

        // The progress callback holds the update inside its download until the task is cancelled.
        let (reached, signal) = AsyncStream.makeStream(of: Void.self)
        let proceed = DispatchSemaphore(value: 0)
        let held = Recorder<Bool>()
        let task = Task {
            try await client.update { p in
                if p.phase == .download && held.all.isEmpty {
                    held.append(true)
                    signal.yield()
                    proceed.wait()
                }
            }
        }
        for await _ in reached { break }
        task.cancel()
        proceed.signal()
        let result = await task.result
        #expect(throws: KitError.self) { try result.get() }
        if case let .failure(e as KitError) = result { #expect(e.status == .cancelled, "\(e)") }
        #expect(client.currentVersion == 0, "the cancelled update changed nothing served")

        // The client is usable again, and the next update finishes the job.
        #expect(try await client.update())
        #expect(client.currentVersion == 1)
        #expect(try contents(client.resolve("big/3.bin")) == noise(1 << 20, seed: 4))
    }

    @Test func theEventStreamEndsWithTheOutcomeAndBreakingOutCancels() async throws {
        let s = Scratch()
        defer { s.cleanup() }
        var url = try s.publish([("a.txt", Array("one".utf8))], version: 1)
        let client = try AssetPatchClient(dataDirectory: s.path + "/data", options: .init(manifestURL: url))
        var last: UpdateEvent?
        var phases: [UpdatePhase] = []
        for try await event in client.updates() {
            if case let .progress(p) = event { phases.append(p.phase) }
            last = event
        }
        #expect(last == .finished(installed: true) && phases.first == .check && phases.last == .done)

        url = try s.publish((0..<8).map { ("big/\($0).bin", noise(1 << 20, seed: UInt64($0 + 9))) }, version: 2, repo: "repo2")
        try client.apply(.init(manifestURL: url))
        for try await event in client.updates() {
            if case let .progress(p) = event, p.phase == .download { break }  // ends the stream: cancels the update
        }
        // The cancelled update must have stopped before the next one can run (else .busy).
        var outcome: Result<Bool, KitError> = .failure(KitError(.busy, ""))
        for _ in 0..<200 {
            do { outcome = .success(try await client.update()) } catch { outcome = .failure(error) }
            if case .failure(let e) = outcome, e.status == .busy { try await Task.sleep(nanoseconds: 10_000_000); continue }
            break
        }
        // Cancelled mid-way (then this update installs version 2), or, on a slow machine, done
        // before the cancellation arrived (then it is current): never left running or broken.
        _ = try outcome.get()
        #expect(client.currentVersion == 2)
    }

    /// The error `body` throws (nil: none), checked to be an `KitError`.
    func failure(_ body: () async throws -> Void) async -> KitError? {
        do { try await body() } catch let e as KitError { return e } catch {
            Issue.record("not an KitError: \(error)")
        }
        return nil
    }

    @Test func failuresAreOneErrorTypeWithTheCStatusAndAMessage() async throws {
        let s = Scratch()
        defer { s.cleanup() }
        let client = try AssetPatchClient(dataDirectory: s.path + "/data")
        #expect(throws: KitError(.notFound, "no resource \"missing.txt\" in the active release or the bundle")) {
            try client.resolve("missing.txt")
        }
        #expect(await failure { _ = try client.resolve("../etc/passwd") }?.status == .argument)
        let noURL = await failure { _ = try await client.update() }
        #expect(noURL?.status == .state && noURL?.description.hasPrefix("ASSETPATCH_ERR_STATE: ") == true)
        let bad = await failure { try client.apply(.init(parallelDownloads: 99)) }
        #expect(bad?.status == .argument && bad?.message.contains("parallel_downloads") == true)
        #expect(await failure { _ = try AssetPatchClient(dataDirectory: s.path + "/data2", options: .init(manifestURL: "ftp://h/m.json")) }?
            .status == .argument)
        try client.apply(.init(manifestURL: URLs.fileURL(forPath: s.path + "/nowhere/manifest.json")))
        #expect(await failure { _ = try await client.check() }?.status == .io)
        #expect(await failure { try client.markGood() }?.status == .state)
        client.close()
        client.close()
        #expect(await failure { _ = try client.resolve("a.txt") }?.status == .state)
    }

    @Test func lifecycleAndReleaseDetailsThroughTheSwiftAPI() async throws {
        let s = Scratch()
        defer { s.cleanup() }
        let client = try AssetPatchClient(dataDirectory: s.path + "/data", options: .init(keepVersions: 2))
        for v in Int64(1)...2 {
            try client.apply(.init(manifestURL: try s.publish([("v.txt", Array("version \(v)".utf8))], version: v, repo: "r\(v)")))
            #expect(try await client.update())
        }
        #expect(try client.release(.active)?.version == 2 && client.release(.active)?.label == "v2")
        #expect(try client.lifecycle().activeVersion == 2 && !client.lifecycle().activeMarkedGood)
        try client.markGood()
        #expect(try client.lifecycle().activeMarkedGood)
        #expect(try client.rollback() == 1)
        #expect(try contents(client.resolve("v.txt")) == Array("version 1".utf8))
        let l = try client.lifecycle()
        #expect(l.activeVersion == 1 && l.badVersions == 1 && l.lastRollback?.from == 2 && l.lastRollback?.to == 1)
        #expect(try client.diskUsage().releases > 0)
        #expect(try client.plugins().isEmpty)
        try client.reset()
        #expect(client.currentVersion == 0)
        #expect(try client.release(.active) == nil)
    }

    @Test func outcomeEventsAreReadAcknowledgedAndHandedOutLive() async throws {
        let s = Scratch()
        defer { s.cleanup() }
        let live = Recorder<String>()
        let client = try AssetPatchClient(dataDirectory: s.path + "/data",
                                          options: .init(manifestURL: try s.publish([("v.txt", Array("one".utf8))], version: 1)))
        client.setEventHandler { live.append($0) }
        #expect(try await client.update())
        try client.markGood()
        let events = try client.events()
        #expect(events.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(events.map { $0.json.contains("\"event\":\"marked_good\"") } == [false, false, false, false, true])
        #expect(live.all == events.map(\.json))
        try client.acknowledgeEvents(through: 4)
        #expect(try client.events().map(\.seq) == [5])
        let info = try client.eventsInfo()
        #expect(info.pending == 1 && info.ackedSeq == 4 && info.lastSeq == 5 && info.dropped == 0)
        #expect(await failure { try client.acknowledgeEvents(through: 6) }?.status == .argument)
    }
}

/// The C API and the Swift API are two spellings over one core: these fail when one of them
/// gains something the other lacks.
@Suite struct NoDriftTests {
    @Test func everyStatusOfTheCoreHasItsSwiftCaseWithTheSameCodeAndName() {
        let failures = AssetPatchCore.Status.allCases.filter { $0.rawValue < 0 }
        #expect(failures.count == KitError.Status.allCases.count)
        for s in failures {
            let mirrored = KitError.Status(rawValue: s.rawValue)
            #expect(mirrored != nil && mirrored?.name == "\(s.name)", "\(s.name)")
        }
    }

    /// The options the header documents, read from it.
    func headerOptions() throws -> Set<String> {
        let root = String(#filePath.prefix(upTo: #filePath.firstRange(of: "/Tests/AssetPatchKitTests/")!.lowerBound))
        let header = String(decoding: try FS.readFile(root + "/include/assetpatch.h"), as: UTF8.self)
        let start = try #require(header.firstRange(of: "Sets an option;"))
        let end = try #require(header[start.upperBound...].firstRange(of: "@return"))
        let block = header[start.upperBound..<end.lowerBound]
        var names = Set<String>()
        for line in block.split(separator: "\n") {
            // " *   name    description": an option starts a line, two spaces after the asterisk.
            let text = line.drop { $0 == " " || $0 == "*" }
            guard line.hasPrefix(" *   "), !line.hasPrefix(" *    "),
                  let word = text.split(separator: " ").first, word.allSatisfy({ $0.isLowercase || $0 == "_" }) else { continue }
            names.insert(String(word))
        }
        return names
    }

    @Test func everyOptionOfTheHeaderIsATypedOptionAppliedByTheCoreParser() throws {
        let documented = try headerOptions()
        #expect(documented.count >= 20 && documented.contains("manifest_url") && documented.contains("tcp_quickack"))
        // A real key document for key_document, which the parser reads and checks.
        let dir = Scratch()
        defer { dir.cleanup() }
        let (rootSeed, rootPub) = try Ed25519.generate()
        var doc = KeyDocument(version: 1, expires: unixTime() + 3600, root: KeySet(keys: [rootPub], threshold: 1),
                              signing: KeySet(keys: [rootPub], threshold: 1))
        try doc.sign(seed: rootSeed)
        try FS.writeAtomically(dir.path + "/keys.json", doc.serialized())
        let all = AssetPatchClient.Options(manifestURL: "file:///m.json", publicKeys: ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="], package: "kit",
                                           appVersion: "1.0", variants: ["@2x", ""],
                                           apply: .nextOpen, keepVersions: 2, maxFailedLaunches: 3, connectTimeoutMs: 1000,
                                           stallTimeoutMs: 1000, lowSpeedLimit: 10, lowSpeedTimeMs: 2000, maxManifestBytes: 1000, maxReleaseBytes: 1000, maxLegacyArchiveBytes: 1000,
                                           caFile: "/ca.pem", headers: ["X-A: b"], userAgent: "kit", parallelDownloads: 2,
                                           differential: false, differentialMaxPercent: 50, allowUnsignedPlugins: true, tcpQuickAck: false,
                                           keyDocument: dir.path + "/keys.json", channel: "beta", rolloutID: "kit-client", allowCrossOriginKeys: true,
                                           groups: ["fr", "scale-3x"], groupQuotaBytes: 1 << 30, maxRecvSpeed: 1 << 20,
                                           updatePriority: .foreground, fetchPriority: .background, metered: true, meteredMaxBytes: 5000,
                                           mirrors: ["https://a.example/h.json", "https://b.example/h.json"], hedgeMs: 250, headMirrors: false,
                                           events: false, eventsMaxBytes: 1 << 20)
        let spelled = Set(all.settings.map(\.name))
        #expect(spelled == documented, "the header documents \(documented.subtracting(spelled)); Options also spells \(spelled.subtracting(documented))")
        // Applied through the core's one parser: the configuration equals the C API's.
        var viaStrings = ClientConfig()
        for (name, value) in all.settings { try viaStrings.set(name, value) }
        #expect(viaStrings.package == "kit" && viaStrings.http.lowSpeedLimit == 10 && viaStrings.http.lowSpeedTimeMs == 2000 && viaStrings.allowCrossOriginKeys)
        #expect(viaStrings.mirrors == [.http(url: "https://a.example/h.json"), .http(url: "https://b.example/h.json")] && viaStrings.hedgeMs == 250 && !viaStrings.headMirrors)
        #expect(!viaStrings.events && viaStrings.eventsMaxBytes == 1 << 20)
        #expect(viaStrings.parallelDownloads == 2 && viaStrings.differential == false && viaStrings.http.headers == ["X-A: b"]
                && viaStrings.variants == ["@2x", ""] && viaStrings.apply == .nextOpen && viaStrings.allowUnsignedPlugins)
        #expect(viaStrings.channel == "beta" && viaStrings.rolloutID == "kit-client" && viaStrings.keyDocument?.version == 1)
        #expect(viaStrings.groups == ["fr", "scale-3x"] && viaStrings.groupQuotaBytes == 1 << 30)
        #expect(viaStrings.maxRecvSpeed == 1 << 20 && viaStrings.updateForeground && !viaStrings.fetchForeground
                && viaStrings.metered && viaStrings.meteredMaxBytes == 5000)
    }
}
