import Testing
@testable import AssetPatchCore

/// What is read from a store's XML answers, and how a large file is cut into parts, at their
/// boundaries.
@Suite struct ObjectStoreTests {
    @Test func entitiesAndNumericReferencesAreRead() {
        // rclone writes a quoted ETag with numeric references; AWS with &quot;.
        #expect(XMLText.unescape("&#34;bc08&#34;") == "\"bc08\"")
        #expect(XMLText.unescape("&quot;bc08&quot;") == "\"bc08\"")
        #expect(XMLText.unescape("&#x22;a&#X3c;") == "\"a<")
        #expect(XMLText.unescape("a&amp;lt;b") == "a&lt;b")  // once, not twice
        #expect(XMLText.unescape("&bogus; & &#xZZ; &#1114112;") == "&bogus; & &#xZZ; &#1114112;")
        #expect(XMLText.unescape(XMLText.escape("<a & \"b\">")) == "<a & \"b\">")
    }

    @Test func elementsAreFoundByExactName() {
        let body = Array("<R><Part><PartNumber>1</PartNumber><ETag>e</ETag></Part><Part><PartNumber>2</PartNumber></Part></R>".utf8)
        #expect(XMLText.all("Part", in: body).count == 2)
        #expect(XMLText.first("PartNumber", in: body) == "1")
        #expect(XMLText.first("Missing", in: body) == nil)
    }

    @Test func partsAreEqualButTheLastAndAtMostTenThousand() {
        let mib: UInt64 = 1 << 20
        #expect(MultipartUpload.partSize(for: 100 * mib, preferred: 16 * mib) == 16 * mib)
        #expect(MultipartUpload.partSize(for: 100 * mib, preferred: 1 * mib) == 5 * mib)  // S3's smallest
        // Exactly 10,000 parts of the preferred size fit; one byte more grows the part to the next MiB.
        #expect(MultipartUpload.partSize(for: 10_000 * 16 * mib, preferred: 16 * mib) == 16 * mib)
        #expect(MultipartUpload.partSize(for: 10_000 * 16 * mib + 1, preferred: 16 * mib) == 17 * mib)
        let location = ObjectStore.Location(endpoint: "http://127.0.0.1:1", region: "us-east-1", bucket: "b", prefix: "", pathStyle: true)
        let store = ObjectStore(location, accessKey: "k", secretKey: "s")
        for size in [5 * mib, 5 * mib + 1, 23 * mib, 10 * mib] {
            let upload = try! MultipartUpload(store: store, key: "k", file: "/dev/null", size: size, preferredPartSize: 5 * mib)
            let lengths = (1...upload.count).map { upload.range($0).length }
            #expect(UInt64(lengths.reduce(0, +)) == size)
            #expect(lengths.dropLast().allSatisfy { UInt64($0) == 5 * mib })
            #expect(lengths.last! >= 1 && UInt64(lengths.last!) <= 5 * mib)
        }
    }
}
