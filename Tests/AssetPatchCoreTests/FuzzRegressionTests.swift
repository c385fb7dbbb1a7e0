import Glibc
import Testing
@testable import AssetPatchCore

/// Replays the inputs that once crashed a fuzz target (fuzz/regressions/TARGET/*) through the
/// same code and invariants, so each fixed bug stays fixed in the ordinary test run.
@Suite struct FuzzRegressionTests {
    static let root = FS.parent(of: FS.parent(of: FS.parent(of: String(#filePath)))) + "/fuzz/regressions"

    func inputs(_ target: String) -> [[UInt8]] {
        let dir = FuzzRegressionTests.root + "/" + target
        return ((try? FS.list(dir)) ?? []).sorted().compactMap { try? FS.readFile(dir + "/" + $0) }
    }

    @Test func nameInputs() {
        for bytes in inputs("name") {
            let valid = bytes.withUnsafeBytes { ResourceName.isValid($0) }
            let reference: Bool = {
                guard !bytes.isEmpty, bytes.first != 0x2F, !bytes.contains(0), !bytes.contains(0x5C),
                      String(validating: bytes, as: UTF8.self) != nil else { return false }
                return !bytes.split(separator: 0x2F, omittingEmptySubsequences: false)
                    .contains { $0.isEmpty || $0.count > ResourceName.maxComponentLength || $0.elementsEqual([46]) || $0.elementsEqual([46, 46]) }
            }()
            #expect(valid == reference)
            guard valid, let name = String(validating: bytes, as: UTF8.self) else { continue }
            #expect(FS.absolute("/root/dir/" + name).utf8.starts(with: "/root/dir/".utf8))
            #expect(name.slashComponents.count == bytes.split(separator: 0x2F).count)
            let variant = ResourceName.applyingVariant(name, "@2x")
            #expect(ResourceName.isValid(variant) || variant.utf8.count > ResourceName.maxLength
                    || variant.utf8.split(separator: 0x2F).contains { $0.count > ResourceName.maxComponentLength })
        }
    }

    @Test func manifestInputs() {
        for bytes in inputs("manifest") {
            if let m = try? Manifest.decode(bytes) { #expect(m.files.allSatisfy { ResourceName.isValid($0.path) }) }
        }
    }

    @Test func indexInputs() {
        for bytes in inputs("index") {
            if case let .files(files)? = try? IndexPage.decode(bytes, source: "regression") {
                #expect(files.allSatisfy { ResourceName.isValid($0.file.path) && $0.file.location!.dataOffset - $0.file.location!.headerOffset >= 30 })
            }
        }
        #expect(!inputs("index").isEmpty)
    }

    @Test func zipInputs() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        for (i, bytes) in inputs("zip").enumerated() {
            try dir.write("\(i).zip", bytes)
            guard let z = try? ZipReader(path: dir.path + "/\(i).zip") else { continue }
            for e in z.entries where !e.isDirectory {
                var n: UInt64 = 0
                try? z.extract(e, buffers: ZipBuffers(size: 4096)) { n += UInt64($0.count) }
                #expect(n <= e.uncompressedSize)
            }
        }
    }
}
