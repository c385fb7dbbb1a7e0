import Testing
@testable import AssetPatchCore

/// Where the end record is searched for, and what is passed over on the way.
@Suite struct EndRecordTests {
    func archive() -> [UInt8] {
        var raw = RawZip()
        raw.stored("a.txt", Array("alpha".utf8))
        raw.stored("b/c.txt", Array("gamma".utf8))
        return raw.bytes()
    }

    func names(_ bytes: [UInt8]) throws -> [String] {
        var out: [String] = []
        try withZip(bytes) { out = try ZipReader(path: $0).entries.map(\.name) }
        return out
    }

    @Test func trailingPaddingAndJunkArePassedOver() throws {
        let zip = archive()
        #expect(try names(zip + [UInt8](repeating: 0, count: 10240 - zip.count % 10240)) == ["a.txt", "b/c.txt"])
        #expect(try names(zip + Array("appended junk".utf8)) == ["a.txt", "b/c.txt"])
    }

    @Test func aFakeEndRecordInTrailingBytesIsPassedOver() throws {
        // A signature after the real record whose directory is implausible must not win.
        var fake: [UInt8] = []
        fake.put32(0x0605_4b50); fake.put16(0); fake.put16(0); fake.put16(1); fake.put16(1)
        fake.put32(46); fake.put32(3); fake.put16(0)
        #expect(try names(archive() + fake) == ["a.txt", "b/c.txt"])
    }

    @Test func trailingBytesBeyondTheSearchWindowAreNotAZip() throws {
        let junk = [UInt8](repeating: 0x20, count: 22 + 65535 + ZipReader.maxTrailingBytes)
        try withZip(archive() + junk) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
    }

    @Test func realMultiDiskFieldsAreStillRefused() throws {
        var zip = archive()
        let eocd = zip.count - 22
        zip[eocd + 4] = 1  // this disk: 1
        try withZip(zip) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
    }

    @Test func ffffDiskFieldsWithoutAZip64RecordAreRefused() throws {
        var zip = archive()
        let eocd = zip.count - 22
        for i in 4..<8 { zip[eocd + i] = 0xFF }
        try withZip(zip) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
    }
}

@Suite struct HTTPPolicyTests {
    @Test func retryAfterSecondsAndDates() {
        #expect(RetryAfter.milliseconds("2", now: 0) == 2000)
        #expect(RetryAfter.milliseconds(" 120 ", now: 0) == 120_000)
        let t = HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(t == 784_111_777)
        #expect(RetryAfter.milliseconds("Sun, 06 Nov 1994 08:49:47 GMT", now: 784_111_777) == 10_000)
        #expect(RetryAfter.milliseconds("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_800) == 0)
        #expect(RetryAfter.milliseconds("soon", now: 0) == nil)
        #expect(RetryAfter.milliseconds("-1", now: 0) == nil)
    }

    @Test func statusErrorsAreTransientOnlyWhereARetryCanHelp() {
        func head(_ status: Int, _ headers: [(String, String)] = []) -> ResponseHead {
            ResponseHead(status: status, headers: headers, effectiveURL: "")
        }
        #expect(HTTPClient.statusError(head(503), "GET x").transient)
        #expect(HTTPClient.statusError(head(500), "GET x").transient)
        #expect(!HTTPClient.statusError(head(404), "GET x").transient)
        #expect(!HTTPClient.statusError(head(403), "GET x").transient)
        #expect(!HTTPClient.statusError(head(429), "GET x").transient)
        let slowDown = HTTPClient.statusError(head(429, [("Retry-After", "3")]), "GET x")
        #expect(slowDown.transient && slowDown.retryAfterMs == 3000 && slowDown.status == .http)
    }

    @Test func contentCodings() throws {
        func head(_ value: String?) -> ResponseHead {
            ResponseHead(status: 200, headers: value.map { [("Content-Encoding", $0)] } ?? [], effectiveURL: "")
        }
        #expect(try ContentDecoder.coding(of: head(nil), "GET x") == nil)
        #expect(try ContentDecoder.coding(of: head("identity"), "GET x") == nil)
        #expect(try ContentDecoder.coding(of: head("GZIP"), "GET x") == "gzip")
        #expect(statusOf { _ = try ContentDecoder.coding(of: head("br"), "GET x") } == .http)
        #expect(statusOf { _ = try ContentDecoder.coding(of: head("gzip, gzip"), "GET x") } == .http)
    }

    @Test func partialRecordsOfEarlierReleasesStillResume() {
        let old = PartialMeta.from(Array(#"{"url":"http://x/a.zip","etag":"\"abc\""}"#.utf8))
        #expect(old == PartialMeta(url: "http://x/a.zip", validator: "\"abc\"", coding: nil))
        #expect(old?.resumeValidator == "\"abc\"")
        let decoded = PartialMeta(url: "u", validator: "\"abc\"", coding: "gzip")
        #expect(decoded.resumeValidator == nil)
        #expect(PartialMeta.from(decoded.toJSON().serialized().utf8.map { $0 }) == decoded)
    }

    @Test func locationsAreParsedOnce() {
        #expect(Location("HTTPS://cdn.example/m.json") == .http(url: "HTTPS://cdn.example/m.json"))
        #expect(Location("file:///tmp/a%20b/m.json") == .file(path: "/tmp/a b/m.json", url: "file:///tmp/a%20b/m.json"))
        #expect(Location("file://elsewhere/m.json") == nil)
        #expect(Location("ftp://x/m.json") == nil)
        #expect(Location("https://user:secret@cdn.example/m.json?token=1")?.shown == "https://cdn.example/m.json")
    }
}
