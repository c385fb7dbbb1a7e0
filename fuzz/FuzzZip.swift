// libFuzzer target: zip parsing and extraction of untrusted archives.
// Invariants: never crash; an entry never yields more bytes than its declared size; every
// accepted name is a safe relative path; entries never overlap.
import Glibc

private let path = "/dev/shm/assetpatch-fuzz-\(getpid()).zip"
private let buffers = ZipBuffers(size: 16 << 10)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzZip(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let f = try? File.open(path, O_WRONLY | O_CREAT | O_TRUNC) else { return 0 }
    try? f.write(UnsafeRawBufferPointer(start: data, count: size))
    guard let zip = try? ZipReader(path: path) else { return 0 }
    var total: UInt64 = 0
    for e in zip.entries where !e.isDirectory {
        precondition(ResourceName.isValid(e.name), "unsafe entry name accepted: \(e.name)")
        var produced: UInt64 = 0
        do {
            try zip.extract(e, buffers: buffers) { chunk in
                produced += UInt64(chunk.count)
                precondition(produced <= e.uncompressedSize, "inflated past the declared size")
            }
        } catch {}
        total += produced
        precondition(total <= UInt64(size) * 1100 + 1 << 20, "output out of proportion to the input")
    }
    return 0
}
