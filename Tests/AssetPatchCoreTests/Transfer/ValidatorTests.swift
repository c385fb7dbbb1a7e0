import Glibc
import Testing
@testable import AssetPatchCore

/// Which validators a client sends back, and the manifests it keeps for a 304.
@Suite struct ValidatorTests {
    func head(_ headers: [(String, String)], status: Int = 200) -> ResponseHead {
        ResponseHead(status: status, headers: headers, effectiveURL: "https://cdn.example/m.json")
    }

    /// RFC 9110 8.8.2.2: a Last-Modified at least a second before the Date is strong; one in the
    /// same second (or later, or without a Date to judge by) may also describe the next file.
    @Test func aLastModifiedInTheSecondOfTheResponseIsRacy() {
        let lm = "Tue, 24 Nov 2026 10:00:00 GMT"
        #expect(Validators.reusable(head([("ETag", "\"a\""), ("Last-Modified", lm), ("Date", "Tue, 24 Nov 2026 10:00:01 GMT")])) != nil)
        #expect(Validators.reusable(head([("ETag", "\"a\""), ("Last-Modified", lm), ("Date", lm)])) == nil)
        #expect(Validators.reusable(head([("Last-Modified", lm), ("Date", "Tue, 24 Nov 2026 09:59:59 GMT")])) == nil)
        #expect(Validators.reusable(head([("Last-Modified", lm)])) == nil, "no Date to judge by")
        #expect(Validators.reusable(head([("Last-Modified", "yesterday"), ("Date", lm)])) == nil)
        #expect(Validators.reusable(head([("ETag", "\"content-hash\"")])) == Validators(etag: "\"content-hash\"", lastModified: nil))
        #expect(Validators.reusable(head([("Date", lm)])) == nil)
    }

    @Test func keptCopiesAreAskedForTogetherAndA304NamesItsOwn() {
        func entry(_ etag: String?, _ text: String, lm: String? = nil) -> ManifestCache.Entry {
            ManifestCache.Entry(finalURL: "https://edge/" + text, validators: Validators(etag: etag, lastModified: lm), bytes: Array(text.utf8))
        }
        var cache = ManifestCache(url: "https://cdn.example/m.json", entries: [])
        cache.insert(entry("\"v1\"", "one"))
        cache.insert(entry("W/\"v2\"", "two"))
        #expect(cache.conditionalHeaders == ["If-None-Match: W/\"v2\", \"v1\""])
        // Weak comparison, as If-None-Match is compared: either spelling names the copy.
        #expect(cache.match(head([("ETag", "\"v2\"")], status: 304))?.bytes == Array("two".utf8))
        #expect(cache.match(head([("ETag", "W/\"v1\"")], status: 304))?.bytes == Array("one".utf8))
        #expect(cache.match(head([], status: 304)) == nil, "two copies asked about, none named")
        #expect(cache.match(head([("ETag", "\"v9\"")], status: 304)) == nil)
        // The same content again replaces its copy; the oldest go beyond four.
        cache.insert(entry("\"v1b\"", "one"))
        #expect(cache.entries.map { String(decoding: $0.bytes, as: UTF8.self) } == ["one", "two"])
        for i in 3...7 { cache.insert(entry("\"v\(i)\"", "r\(i)")) }
        #expect(cache.entries.count == ManifestCache.maxEntries && cache.entries.first?.validators.etag == "\"v7\"")
        // Round trip through the file, and the single copy an older release kept.
        let back = ManifestCache.decode(cache.encode())
        #expect(back?.entries.map(\.bytes) == cache.entries.map(\.bytes) && back?.url == cache.url)
        let old = Array("{\"url\":\"u\",\"final_url\":\"f\",\"last_modified\":\"x\"}\nBODY".utf8)
        let single = ManifestCache.decode(old)
        #expect(single?.entries.count == 1 && single?.entries[0].bytes == Array("BODY".utf8))
        #expect(single?.conditionalHeaders == ["If-Modified-Since: x"])
        // A copy without an ETag: only the newest is asked about.
        var mixed = ManifestCache(url: "u", entries: [])
        mixed.insert(entry("\"e\"", "a"))
        mixed.insert(entry(nil, "b", lm: "Tue, 24 Nov 2026 10:00:00 GMT"))
        #expect(mixed.conditionalHeaders == ["If-Modified-Since: Tue, 24 Nov 2026 10:00:00 GMT"])
        #expect(mixed.match(head([], status: 304))?.bytes == Array("b".utf8))
    }
}

/// A repository's mutable files get validators that differ at every write, also within one
/// second: a modification time a whole second after the previous version's.
@Suite struct MutableFileTests {
    @Test func everyVersionIsAWholeSecondAfterThePrevious() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let path = dir.path + "/manifest.json"
        var seen: [Int64] = []
        for i in 0..<5 {  // far faster than one a second
            let given = try MutableFile.write(path, Array("version \(i)\n".utf8))
            var st = stat()
            #expect(lstat(path, &st) == 0 && Int64(st.st_mtim.tv_sec) == given && st.st_mtim.tv_nsec == 0)
            seen.append(given)
        }
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $1 >= $0 + 1 }, "\(seen)")
        #expect(seen[0] >= unixTime() - 5)
        // A previous version dated ahead of the clock: the next is later still.
        #expect(MutableFile.nextModificationTime(path, now: 0) == seen.last! + 1)
        #expect(MutableFile.nextModificationTime(dir.path + "/missing", now: 42) == 42)
    }
}
