import Glibc

/// Turns the bytes of one `FetchRange`, pushed as they arrive, into verified files: for each
/// entry it checks the local header against the manifest's location and name, inflates the data
/// while hashing it, and, when size and sha256 match the manifest, renames the file to
/// `<dir>/<sha256>` (read-only) and reports it. Bytes between entries are passed over; more
/// bytes than the range holds are refused.
/// What consumes one range request's bytes as they arrive.
protocol RangeConsumer: AnyObject {
    /// The archive bytes asked for (only `start` and `end` matter here).
    var range: FetchRange { get }
    func push(_ chunk: UnsafeRawBufferPointer) throws
    /// The response ended: everything asked for must have arrived.
    func finish() throws
    /// The transfer failed or was cancelled: drop what is half-written.
    func abandon()
    /// A consumer for what this one has not verified yet, from the first file or chunk not
    /// completed (after bytes that failed a check, from another source); nil when none is left.
    func rest() -> (any RangeConsumer)?
}

final class RangeReceiver: RangeConsumer {
    let range: FetchRange
    let dir: String
    let shown: String
    /// Called for each verified file with its path.
    let onFile: (ManifestFile, String) throws -> Void

    /// Archive offset of the next byte.
    private(set) var offset: UInt64
    private var index = 0
    private var header: [UInt8] = []
    /// The entry being received (nil between entries).
    private var decoder: EntryDecoder?
    /// Made for the first entry and reset for each next one: a thousand entries cost one
    /// inflater (its window and output buffer) and one digest context.
    private var inflater: Inflater?
    private var digest: Digest?
    private var out: File?
    private var tempPath: String?

    init(_ range: FetchRange, dir: String, shown: String, onFile: @escaping (ManifestFile, String) throws -> Void) {
        self.range = range
        self.dir = dir
        self.shown = shown
        self.onFile = onFile
        offset = range.start
    }

    deinit { abandon() }

    /// Bytes received so far.
    var received: UInt64 { offset - range.start }

    /// Removes the file being written, if any (a failed or cancelled transfer).
    func abandon() {
        out = nil
        if let tempPath { try? FS.unlink(tempPath) }
        tempPath = nil
        decoder = nil
        inflater = nil
        digest = nil
    }

    private func mismatch(_ what: String) -> DifferentialFallback {
        let name = index < range.entries.count ? "\"\(range.entries[index].path)\"" : "the range"
        return DifferentialFallback(message: "\(shown): bytes \(range.start)-\(range.end - 1): \(name) \(what)", badBytes: true)
    }

    func push(_ chunk: UnsafeRawBufferPointer) throws {
        if UInt64(chunk.count) > range.end - offset {
            throw DifferentialFallback(message: "\(shown): more than the \(range.count) bytes of range \(range.start)-\(range.end - 1) arrived")
        }
        var rest = chunk
        try settle()
        while !rest.isEmpty {
            let l = range.entries[index].location!
            let take: Int
            if offset < l.headerOffset {
                take = Int(min(UInt64(rest.count), l.headerOffset - offset))          // between entries
            } else if offset < l.dataOffset {
                take = Int(min(UInt64(rest.count), l.dataOffset - offset))            // local header
                header.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[0..<take]))
            } else {
                take = Int(min(UInt64(rest.count), l.dataOffset + l.compressedSize - offset))
                try feed(UnsafeRawBufferPointer(rebasing: rest[0..<take]))
            }
            offset += UInt64(take)
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            try settle()
        }
    }

    func rest() -> (any RangeConsumer)? {
        guard index < range.entries.count else { return nil }
        let entries = Array(range.entries[index...])
        return RangeReceiver(FetchRange(start: entries[0].location!.headerOffset, end: range.end, entries: entries), dir: dir, shown: shown,
                             onFile: onFile)
    }

    /// Moves `offset` to the next entry's local header when the receiver is between entries:
    /// a reader of a file on disk skips the bytes in between instead of pushing them.
    func skipToNextEntry() {
        guard index < range.entries.count, header.isEmpty, decoder == nil else { return }
        offset = max(offset, range.entries[index].location!.headerOffset)
    }

    /// After the last byte: every entry was completed.
    func finish() throws {
        try settle()
        if offset != range.end || index != range.entries.count {
            throw mismatch("ended early: \(received) of \(range.count) bytes arrived")
        }
        // Every receiver of a fetch lives until its end: a finished one's inflater (its window
        // and output buffer) is let go.
        inflater = nil
        digest = nil
        header = []
    }

    /// Moves through the entry boundaries the offset has reached: a complete header is checked
    /// and the file opened, complete data is verified and the file kept. Empty data (an empty
    /// file) completes without any byte.
    private func settle() throws {
        while index < range.entries.count {
            let f = range.entries[index], l = f.location!
            if decoder == nil {
                guard offset == l.dataOffset else { return }
                try begin(f, l)
            }
            guard offset == l.dataOffset + l.compressedSize else { return }
            try complete(f)
            index += 1
        }
    }

    private func begin(_ f: ManifestFile, _ l: ArchiveLocation) throws {
        let h = header
        header = []
        let name = Array(f.path.utf8)
        guard h.count >= 30, le32(h, 0) == 0x0403_4b50 else { throw mismatch("has no local header where the manifest says") }
        let flags = le16(h, 6), method = le16(h, 8), nameLength = Int(le16(h, 26)), extraLength = Int(le16(h, 28))
        guard flags & 0x0041 == 0 else { throw mismatch("is encrypted") }
        guard method == l.method, 30 + nameLength + extraLength == h.count, Array(h[30..<(30 + nameLength)]) == name else {
            throw mismatch("has a local header that disagrees with the manifest's location")
        }
        if method == 8 && inflater == nil { inflater = try Inflater(.raw) }
        // The file's sha256 checks every byte: the header's CRC-32 would be a second pass over
        // the output (4% of an update's CPU) that proves nothing more.
        decoder = try EntryDecoder(method: method, size: f.size, reusing: inflater, crc: false)
        if let digest { digest.reset() } else { digest = try Digest(.sha256) }
        let temp = dir + "/." + f.sha256 + ".part"
        try? FS.unlink(temp)
        out = try File.open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
        tempPath = temp
    }

    private func feed(_ bytes: UnsafeRawBufferPointer) throws {
        guard let decoder, let out, let digest else { return }
        do {
            try decoder.push(bytes) { chunk in
                try out.write(chunk)
                digest.update(chunk)
            }
        } catch let failure as InflateFailure {
            throw mismatch(failure.describe(size: decoder.size))
        }
    }

    private func complete(_ f: ManifestFile) throws {
        guard let decoder, let digest, let tempPath else { return }
        do { try decoder.finish() } catch let failure as InflateFailure {
            throw mismatch(failure.describe(size: f.size))
        }
        let sha = digest.finalHex()
        if sha != f.sha256 { throw mismatch("has sha256 \(sha), the manifest says \(f.sha256)") }
        self.out?.startWriteback()
        out = nil
        let path = dir + "/" + f.sha256
        try FS.rename(tempPath, path)
        self.tempPath = nil
        self.decoder = nil
        try onFile(f, path)
    }
}
