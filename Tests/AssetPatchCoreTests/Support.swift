import Glibc
@testable import AssetPatchCore

/// A fresh directory under /tmp, removed by `cleanup()`.
struct TempDir {
    let path: String

    init() {
        var template = Array("/tmp/assetpatch-test.XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = p.map { String(cString: $0) } ?? "/tmp/assetpatch-test-fallback"
    }

    func cleanup() { try? FS.removeTree(path) }

    func write(_ rel: String, _ bytes: [UInt8]) throws {
        let full = path + "/" + rel
        try FS.makeDirectories(FS.parent(of: full))
        let f = try File.open(full, O_WRONLY | O_CREAT | O_TRUNC)
        try f.write(bytes)
    }

    func write(_ rel: String, _ text: String) throws { try write(rel, Array(text.utf8)) }

    func read(_ rel: String) throws -> [UInt8] { try FS.readFile(path + "/" + rel) }
}

/// Deterministic pseudo-random bytes (xorshift), incompressible enough for zip tests.
func noise(_ count: Int, seed: UInt64 = 42) -> [UInt8] {
    var x = seed | 1
    var out = [UInt8](repeating: 0, count: count)
    for i in 0..<count {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17
        out[i] = UInt8(truncatingIfNeeded: x)
    }
    return out
}

/// Publishes `files` (path -> bytes) as a format-1 release into `repo` with the publisher
/// `assetpatch publish` runs, and returns the manifest's file:// URL. What a publisher would not
/// write is made afterwards, on the manifest's JSON: `mutate` edits it, `locations: false` drops
/// the files' zip locations; the result is signed with `seed` as publish would sign it.
@discardableResult
func publishRelease(_ files: [(String, [UInt8])], version: Int64, repo: TempDir, package: String = "test",
                    seed: [UInt8]? = nil, locations: Bool = true,
                    mutate: ((inout [(String, JSON)]) -> Void)? = nil) throws -> String {
    let staging = TempDir()
    defer { staging.cleanup() }
    for (p, b) in files { try staging.write(p, b) }
    // Tests publish what a publisher refuses (older versions, broken manifests), so the
    // repository's previous manifest does not constrain this one.
    try? FS.unlink(repo.path + "/manifest.json")
    try? FS.removeTree(repo.path + "/history/\(version)")
    var request = PublishRequest(source: staging.path, repo: repo.path)
    request.package = package
    request.version = version
    let done = try Publisher.publish(request)
    var manifest = done.manifest
    if !locations { for i in manifest.files.indices { manifest.files[i].location = nil } }
    guard case var .object(pairs) = manifest.toJSON() else { fatalError("manifest is an object") }
    mutate?(&pairs)
    var bytes = Array(JSON.object(pairs).serialized(indent: 1).utf8)
    if let seed { bytes = Array(try DSSE.seal(bytes, seed: seed).serialized().utf8) }
    try MutableFile.write(repo.path + "/manifest.json", bytes)
    return URLs.fileURL(forPath: repo.path + "/manifest.json")
}

/// The status of the error `body` throws, or nil when it does not throw.
func statusOf(_ body: () throws -> Void) -> Status? {
    do { try body() } catch let e as AssetPatchError { return e.status } catch { return .internal }
    return nil
}

/// Moves `files[file].zip` of a manifest being published one byte later (header and data
/// offsets): still well-formed, no longer true of the archive.
func shiftLocation(_ pairs: inout [(String, JSON)], file: Int) {
    guard let i = pairs.firstIndex(where: { $0.0 == "files" }), case .array(var items) = pairs[i].1,
          case .object(var entry) = items[file], let z = entry.firstIndex(where: { $0.0 == "zip" }),
          case .object(var zip) = entry[z].1 else { return }
    for k in zip.indices where zip[k].0 == "header_offset" || zip[k].0 == "data_offset" {
        if let v = zip[k].1.int64 { zip[k].1 = .int(v + 1) }
    }
    entry[z].1 = .object(zip)
    items[file] = .object(entry)
    pairs[i].1 = .array(items)
}
