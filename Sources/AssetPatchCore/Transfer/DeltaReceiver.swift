import Glibc

/// Turns the bytes of one range of a delta file, pushed as they arrive, into verified files:
/// each delta in it is inflated and applied to its base on disk as it arrives (`DeltaApplier`),
/// the output hashed, and kept as `<dir>/<sha256>` (read-only) only when it is the file's
/// size and sha256. A delta that does not make its file (bytes changed on the way, a base
/// changed on disk) is reported to `onFailure` and costs only that file: the update fetches
/// it from the archive instead. Bytes between deltas are passed over; more bytes than the
/// range holds are refused.
final class DeltaReceiver: RangeConsumer {
    let range: FetchRange
    let takes: [DeltaTake]
    let dir: String
    let shown: String
    let onFile: (ManifestFile, String) -> Void
    let onFailure: (ManifestFile, String) -> Void

    private var offset: UInt64
    private var index = 0
    private var inflater: Inflater?
    private var digest: Digest?
    private var applier: DeltaApplier?
    private var out: File?
    /// What the applier made, written and hashed a quarter MiB at a time, not per instruction.
    private let pending = Pending()
    private var tempPath: String?
    /// The current delta failed: its remaining bytes are passed over.
    private var failed = false

    private final class Pending {
        var bytes: [UInt8] = []
    }

    /// `takes`: deltas in file order, inside `range`.
    init(_ range: FetchRange, takes: [DeltaTake], dir: String, shown: String, onFile: @escaping (ManifestFile, String) -> Void,
         onFailure: @escaping (ManifestFile, String) -> Void) {
        self.range = range
        self.takes = takes
        self.dir = dir
        self.shown = shown
        self.onFile = onFile
        self.onFailure = onFailure
        offset = range.start
    }

    deinit { abandon() }

    func abandon() {
        out = nil
        applier = nil
        if let tempPath { try? FS.unlink(tempPath) }
        tempPath = nil
    }

    func push(_ chunk: UnsafeRawBufferPointer) throws {
        guard UInt64(chunk.count) <= range.end - offset else {
            throw DifferentialFallback(message: "\(shown): more than the \(range.count) bytes of range \(range.start)-\(range.end - 1) arrived")
        }
        var rest = chunk
        while !rest.isEmpty {
            guard index < takes.count else {
                offset += UInt64(rest.count)
                return
            }
            let e = takes[index].entry
            let n: Int
            if offset < e.offset {
                n = Int(min(UInt64(rest.count), e.offset - offset))  // between deltas
            } else {
                n = Int(min(UInt64(rest.count), e.offset + e.length - offset))
                feed(UnsafeRawBufferPointer(rebasing: rest[0..<n]))
            }
            offset += UInt64(n)
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if offset == e.offset + e.length { complete() }
        }
    }

    /// A response cut short is the network's doing: the attempt is retried for what is left.
    func finish() throws {
        guard offset == range.end else {
            throw AssetPatchError(.network, "\(shown): range \(range.start)-\(range.end - 1) cut short at \(offset)", transient: true)
        }
    }

    func rest() -> (any RangeConsumer)? { nil }

    private func fail(_ why: String) {
        guard !failed else { return }
        failed = true
        abandon()
        onFailure(takes[index].file, why)
    }

    private func feed(_ bytes: UnsafeRawBufferPointer) {
        guard !failed else { return }
        do {
            if applier == nil { try begin() }
            guard let inflater, let applier else { return }
            let e = takes[index].entry
            try inflater.push(bytes, limit: e.targetSize &* 12 &+ 64) { try applier.push($0) }
        } catch let f as InflateFailure {
            fail("does not inflate (\(f))")
        } catch let e as AssetPatchError {
            fail(e.message)
        } catch {
            fail("\(error)")
        }
    }

    private func begin() throws {
        let t = takes[index]
        let base = try File.openRead(t.base)
        if let inflater { try inflater.reset() } else { inflater = try Inflater(.raw) }
        if let digest { digest.reset() } else { digest = try Digest(.sha256) }
        let temp = dir + "/." + t.file.sha256 + ".delta-part"
        try? FS.unlink(temp)
        let out = try File.open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
        self.out = out
        tempPath = temp
        let digest = digest!
        let pending = self.pending
        pending.bytes.removeAll(keepingCapacity: true)
        pending.bytes.reserveCapacity(256 << 10)
        applier = DeltaApplier(targetSize: t.entry.targetSize, baseSize: t.entry.baseSize, readBase: { at, buffer in
            var done = 0
            while done < buffer.count {
                let n = try base.pread(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: at + UInt64(done))
                if n == 0 { throw AssetPatchError(.integrity, "\(t.base) is shorter than the delta's base") }
                done += n
            }
        }, write: { bytes in
            if pending.bytes.count + bytes.count > 256 << 10 { try DeltaReceiver.flush(pending, out, digest) }
            if bytes.count >= 256 << 10 {
                try out.write(bytes)
                digest.update(bytes)
            } else {
                pending.bytes.append(contentsOf: bytes)
            }
        })
    }

    private static func flush(_ pending: Pending, _ out: File, _ digest: Digest) throws {
        guard !pending.bytes.isEmpty else { return }
        try pending.bytes.withUnsafeBytes { try out.write($0) }
        digest.update(pending.bytes)
        pending.bytes.removeAll(keepingCapacity: true)
    }

    private func complete() {
        defer {
            failed = false
            applier = nil
            index += 1
        }
        let t = takes[index]
        guard !failed, let applier, let digest, let tempPath, let inflater else { return fail("ended before it began") }
        guard inflater.ended else { return fail("ends inside its deflate stream") }
        do {
            try applier.finish()
            if let out { try DeltaReceiver.flush(pending, out, digest) }
        } catch let e as AssetPatchError { return fail(e.message) } catch { return fail("\(error)") }
        let sha = digest.finalHex()
        guard sha == t.file.sha256 else { return fail("makes sha256 \(sha), the index says \(t.file.sha256)") }
        out?.startWriteback()
        out = nil
        let path = dir + "/" + t.file.sha256
        do { try FS.rename(tempPath, path) } catch { return fail("\(error)") }
        self.tempPath = nil
        onFile(t.file, path)
    }
}
