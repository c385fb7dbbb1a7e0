internal import CZlib

/// One chunk of a chunked file: its bytes' sha256 (raw, 32 bytes), its length, and the length
/// of its compressed form in the archive entry (equal for a stored entry).
package struct ChunkRecord: Sendable, Equatable {
    package var id: ChunkID
    package var size: UInt32
    package var compressedSize: UInt32

    package init(sha256: [UInt8], size: UInt32, compressedSize: UInt32) {
        self.id = ChunkID(sha256)
        self.size = size
        self.compressedSize = compressedSize
    }

    package var sha256: [UInt8] { id.bytes }

    /// This chunk's bytes read from `file` at `offset`; nil when they are short or do not hash
    /// to its sha256.
    func checkedBytes(in file: File, at offset: UInt64) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: Int(size))
        guard (try? bytes.withUnsafeMutableBytes { try file.pread(into: $0, at: offset) }) == bytes.count,
              let d = try? Digest(.sha256) else { return nil }
        d.update(bytes)
        return ChunkID(d.finalBytes()) == id ? bytes : nil
    }
}

/// A chunk's sha256 held inline in four words: a chunk's identity, hashed and compared without
/// touching the heap (a gigabyte of 4 KiB chunks is a quarter of a million of them).
package struct ChunkID: Hashable, Sendable {
    let w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64

    /// `bytes`: 32 bytes (a sha256).
    package init(_ bytes: [UInt8]) {
        precondition(bytes.count == 32, "a chunk id is a sha256")
        func word(_ i: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[i * 8 + $1]) } }
        (w0, w1, w2, w3) = (word(0), word(1), word(2), word(3))
    }

    package var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for w in [w0, w1, w2, w3] { for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: w >> UInt64(shift))) } }
        return out
    }

    package var hex: String { Hex.encode(bytes) }
    /// The first two bytes, big-endian (where chunk pages end: `IndexBuilder`).
    var leading16: UInt16 { UInt16(truncatingIfNeeded: w0 >> 48) }
}

/// Decodes one chunk of a chunked entry: its compressed bytes (a range of the entry's data,
/// starting right after a flush or at the entry's start) inflate to exactly `size` bytes, which
/// must hash to the chunk's sha256. A middle chunk's deflate data does not end the stream (the
/// next chunk continues it), so "exactly `size` bytes from exactly these bytes" is the end; the
/// last chunk's data ends the stream. Anything else is the archive's fault.
///
/// A chunk of an entry whose chunks share history (`linked`: a sync flush, not a full flush,
/// after each) may refer back to the 32 KiB before it: `history` is the file's bytes before
/// the chunk (the last 32 KiB of them count; empty for the first chunk).
package enum ChunkDecoder {
    package enum Failure: Error, Equatable {
        case corrupt(String)
        case wrongSize(produced: UInt64)
        case wrongHash
    }

    /// Most history a chunk of a linked entry may refer back to: deflate's window.
    package static let historyBytes = 32 << 10

    package static func decode(_ compressed: UnsafeRawBufferPointer, method: UInt16, chunk: ChunkRecord,
                               history: UnsafeRawBufferPointer? = nil) throws(Failure) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Int(chunk.size))
        if method == 0 {
            guard compressed.count == Int(chunk.size) else { throw .wrongSize(produced: UInt64(compressed.count)) }
            out.append(contentsOf: compressed)
        } else {
            guard let inflater = try? Inflater(.raw, outputBytes: max(Int(chunk.size) + 1, 1)) else { throw .corrupt("inflateInit2 failed") }
            if let history, history.count > 0 {
                let window = UnsafeRawBufferPointer(rebasing: history[max(0, history.count - historyBytes)...])
                do { try inflater.setDictionary(window) } catch { throw .corrupt("\(error)") }
            }
            do {
                try inflater.push(compressed, limit: UInt64(chunk.size)) { out.append(contentsOf: $0) }
            } catch let f as InflateFailure {
                switch f {
                case let .corrupt(m): throw .corrupt(m)
                case .overrun: throw .wrongSize(produced: UInt64(chunk.size) + 1)
                case .trailing: throw .corrupt("data after the end of the deflate stream")
                case let .short(n): throw .wrongSize(produced: n)
                }
            } catch {
                throw .corrupt("\(error)")
            }
            guard out.count == Int(chunk.size) else { throw .wrongSize(produced: UInt64(out.count)) }
        }
        let d = try? Digest(.sha256)
        d?.update(out)
        guard let d, ChunkID(d.finalBytes()) == chunk.id else { throw .wrongHash }
        return out
    }
}
