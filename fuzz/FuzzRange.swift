// libFuzzer target: a differential update's range bytes, as a hostile server would send them.
// The input is the range; the manifest entries it is judged against come from the local headers
// found in it (so valid-looking ranges are reached), each entry's sha256 from decoding its data
// beforehand where that works. Invariants: never crash; a kept file's bytes hash to its name and
// to its entry's sha256 and are no longer than the entry's size; after `abandon` no partial file
// is left; a push longer than the range is refused.
import Glibc

private let dir = "/dev/shm/assetpatch-fuzz-range-\(getpid())"

/// Entries whose local headers lie in `bytes`, laid out one after another, as a manifest would
/// list them (the offsets are those of the range, which starts at `base`).
private func entries(_ bytes: [UInt8], base: UInt64) -> [ManifestFile] {
    var out: [ManifestFile] = []
    var i = 0
    while i + 30 <= bytes.count, out.count < 8 {
        guard le32(bytes, i) == 0x0403_4b50 else { i += 1; continue }
        let method = le16(bytes, i + 8), compressed = UInt64(le32(bytes, i + 18)), size = UInt64(min(le32(bytes, i + 22), 1 << 20))
        let nameLength = Int(le16(bytes, i + 26)), extraLength = Int(le16(bytes, i + 28))
        let data = i + 30 + nameLength + extraLength
        guard nameLength > 0, data <= bytes.count, UInt64(bytes.count - data) >= compressed, method == 0 || method == 8,
              let name = String(validating: bytes[(i + 30)..<(i + 30 + nameLength)], as: UTF8.self), ResourceName.isValid(name) else {
            i += 1
            continue
        }
        // The sha256 the data decodes to, when it does; otherwise one it can't match.
        var sha = String(repeating: "0", count: 64)
        if let decoder = try? EntryDecoder(method: method, size: size), let digest = try? Digest(.sha256) {
            let ok: Bool = bytes[data..<(data + Int(compressed))].withUnsafeBytes { raw in
                (try? decoder.push(raw) { digest.update($0) }) != nil && (try? decoder.finish()) != nil
            }
            if ok { sha = digest.finalHex() }
        }
        let location = ArchiveLocation(headerOffset: base + UInt64(i), dataOffset: base + UInt64(data), compressedSize: compressed, method: method)
        out.append(ManifestFile(path: name, size: size, sha256: sha, location: location))
        i = data + Int(compressed)
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRange(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 1 else { return 0 }
    let step = Int(data[0]) * 37 + 1                      // chunking chosen by the input
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let base: UInt64 = 1000
    let found = entries(bytes, base: base)
    guard !found.isEmpty else { return 0 }
    let range = FetchRange(start: found[0].location!.headerOffset, end: found.last!.location!.range.upperBound, entries: found)
    try? FS.removeTree(dir)
    try? FS.makeDirectories(dir)
    var kept: [(ManifestFile, String)] = []
    let receiver = RangeReceiver(range, dir: dir, shown: "fuzz") { f, path in kept.append((f, path)) }
    var offset = Int(range.start - base)
    let end = Int(range.end - base)
    do {
        while offset < end {
            let n = min(step, end - offset)
            try bytes[offset..<offset + n].withUnsafeBytes { try receiver.push($0) }
            offset += n
        }
        try receiver.finish()
    } catch {}
    receiver.abandon()
    for (f, path) in kept {
        let content = (try? FS.readFile(path, limit: 2 << 20)) ?? []
        precondition(UInt64(content.count) == f.size, "kept file of the wrong size")
        let d = try! Digest(.sha256)
        content.withUnsafeBytes { d.update($0) }
        let hex = d.finalHex()
        precondition(hex == f.sha256 && path.hasSuffix("/" + hex), "kept file does not hash to its entry")
    }
    let left = (try? FS.list(dir)) ?? []
    precondition(!left.contains { $0.hasSuffix(".part") }, "a partial file was left behind")
    // One byte past the range is refused.
    let extra = RangeReceiver(range, dir: dir, shown: "fuzz") { _, _ in }
    let tooLong = [UInt8](repeating: 0, count: Int(range.count) + 1)
    precondition((try? tooLong.withUnsafeBytes { try extra.push($0) }) == nil, "a push longer than the range was taken")
    extra.abandon()
    try? FS.removeTree(dir)
    return 0
}
