import Glibc

/// A file to add to an archive: its name there, where it is, its chunker when the entry is
/// chunked, and whether its chunks share history (`EntryCompressor`): always when `linked`,
/// otherwise when chunks of their own would cost more than `ownChunkCostLimit` percent
/// (`ChunkCost`; nil: never).
package struct EntrySource: Sendable {
    package var name: String
    package var path: String
    package var chunker: Chunker?
    package var linked: Bool
    package var ownChunkCostLimit: Int?

    package init(name: String, path: String, chunker: Chunker? = nil, linked: Bool = false, ownChunkCostLimit: Int? = nil) {
        self.name = name
        self.path = path
        self.chunker = chunker
        self.linked = linked
        self.ownChunkCostLimit = ownChunkCostLimit
    }
}

/// A file added to an archive: where it lies, its chunks when chunked, and whether they share
/// history.
package typealias AddedFile = (file: ManifestFile, chunks: [ChunkRecord], linked: Bool)

extension ZipWriter {
    /// Adds `sources` in their order, compressed on `jobs` threads (the calling thread is one of
    /// them). Each entry's bytes depend only on its file, so the archive is byte for byte the
    /// same whatever `jobs` is; only the order of the work differs. Returns each file (size,
    /// sha256, where it lies), its chunks and whether they share history, in order.
    ///
    /// Entries enter the archive one at a time, in order (`EntryOrder`): the entry whose turn it
    /// is streams into the archive as it is compressed; the others keep their compressed bytes
    /// in memory until their turn, and past their share of the budget wait for it. Memory
    /// stays bounded by `jobs` × `EntryOrder.bytesPerJob` whatever the files' sizes.
    package func addFiles(_ sources: [EntrySource], jobs: Int) throws -> [AddedFile] {
        let jobs = max(1, min(jobs, sources.count))
        let order = EntryOrder(count: sources.count, jobs: jobs)
        let results = EntryResults(count: sources.count)
        let level = self.level
        let work = { [self] in
            let compressor = EntryCompressor(level: level)
            do {
                while let i = order.take() {
                    try add(sources[i], index: i, compressor: compressor, order: order, results: results)
                }
            } catch {
                order.fail(error)
            }
        }
        var threads: [pthread_t] = []
        do {
            for _ in 1..<jobs { threads.append(try startThread(work)) }
        } catch {
            order.fail(error)
        }
        work()
        for t in threads { pthread_join(t, nil) }
        if let failure = order.failure { throw failure }
        return results.all()
    }

    private func add(_ source: EntrySource, index: Int, compressor: EntryCompressor, order: EntryOrder, results: EntryResults) throws {
        guard let size = FS.fileSize(source.path) else { throw ioError("stat", source.path) }
        let name = Array(source.name.utf8)
        let zip64 = size >= 0xFFFF_0000  // deflate may grow a little: decide before writing
        let out = EntryOutput(writer: self, order: order, index: index, headerLength: ZipWriter.localHeaderLength(name, zip64: zip64))
        try out.begin()
        let entry = try compressor.compress(source.path, size: size, chunker: source.chunker, linked: source.linked,
                                             ownChunkCostLimit: source.ownChunkCostLimit, into: out)
        try out.finish(name: name, zip64: zip64, entry: entry, results: results)
    }

    /// Writes a compressed entry kept in memory at the archive's end (the caller holds the turn).
    func place(_ p: ParkedEntry, results: EntryResults) throws {
        let start = offset
        let header = localHeader(p.name, method: p.entry.method, crc: p.entry.crc, comp: p.entry.compressedSize,
                                 uncomp: p.entry.size, zip64: p.zip64)
        try out.pwrite(header, at: start)
        try p.bytes.withUnsafeBytes { try out.pwrite($0, at: start + UInt64(header.count)) }
        record(p.name, p.entry, zip64: p.zip64, headerOffset: start, index: p.index, results: results)
    }

    /// Notes an entry whose bytes are in the archive from `headerOffset` and moves the end past it.
    func record(_ name: [UInt8], _ e: CompressedEntry, zip64: Bool, headerOffset: UInt64, index: Int, results: EntryResults) {
        let dataOffset = headerOffset + UInt64(ZipWriter.localHeaderLength(name, zip64: zip64))
        offset = dataOffset + e.compressedSize
        written.append(Written(name: name, method: e.method, crc: e.crc, compressed: e.compressedSize, uncompressed: e.size, offset: headerOffset))
        let location = ArchiveLocation(headerOffset: headerOffset, dataOffset: dataOffset, compressedSize: e.compressedSize, method: e.method)
        results.set(index, (ManifestFile(path: String(decoding: name, as: UTF8.self), size: e.size, sha256: e.sha256, location: location), e.chunks, e.linked))
    }
}

/// An entry compressed in memory, waiting for its turn.
struct ParkedEntry {
    var index: Int
    var name: [UInt8]
    var zip64: Bool
    var entry: CompressedEntry
    var bytes: [UInt8]
}

/// The files added, by index. Each slot is set once, by the thread holding the turn; read after
/// every thread is joined.
final class EntryResults: @unchecked Sendable {  // the turn (EntryOrder) orders every write; reads follow the joins
    private var slots: [AddedFile?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ i: Int, _ value: AddedFile) { slots[i] = value }

    func all() -> [AddedFile] { slots.map { $0! } }
}

/// Whose turn it is to write into the archive, the entries parked until theirs, and the memory
/// they may hold. Entries are handed out in order, so the entry whose turn comes next is always
/// being compressed or parked: whoever finishes it writes it and every parked entry after it.
final class EntryOrder: @unchecked Sendable {  // every field is touched with `condition`'s mutex held
    /// Compressed bytes kept in memory per thread (an entry may keep at most this much).
    static let bytesPerJob = 8 << 20

    private let condition = Condition()
    private let count: Int
    private var taken = 0
    /// The entry whose turn comes next, and whether a thread holds the turn.
    private var next = 0
    private var held = false
    private var parked: [Int: ParkedEntry] = [:]
    private var bytesHeld = 0
    private let budget: Int
    private var error: Error?

    init(count: Int, jobs: Int) {
        self.count = count
        budget = jobs * EntryOrder.bytesPerJob
    }

    var failure: Error? { condition.locked { error } }

    /// The next entry to compress; nil when all are taken or one failed.
    func take() -> Int? {
        condition.locked {
            guard error == nil, taken < count else { return nil }
            taken += 1
            return taken - 1
        }
    }

    /// Stops the work: no entry is handed out and no thread waits any longer.
    func fail(_ e: Error) {
        condition.locked {
            if error == nil { error = e }
            condition.broadcast()
        }
    }

    /// Takes the turn if it is `index`'s and free.
    func tryHold(_ index: Int) -> Bool {
        condition.locked {
            guard next == index && !held else { return false }
            held = true
            return true
        }
    }

    /// Waits for `index`'s turn and takes it.
    func hold(_ index: Int) throws {
        try condition.locked {
            while !(next == index && !held) {
                if let error { throw error }
                condition.wait(until: nil)
            }
            held = true
        }
    }

    /// Counts `n` more bytes kept in memory, if the budget allows.
    func reserve(_ n: Int) -> Bool {
        condition.locked {
            guard bytesHeld + n <= budget else { return false }
            bytesHeld += n
            return true
        }
    }

    func release(_ n: Int) {
        condition.locked { bytesHeld -= n }
    }

    /// Parks a finished entry, or, when its turn is free, takes the turn (true: the caller writes it).
    func parkOrHold(_ p: ParkedEntry) -> Bool {
        condition.locked {
            if next == p.index && !held {
                held = true
                return true
            }
            parked[p.index] = p
            return false
        }
    }

    /// The holder wrote entry `next`: the turn passes on. Returns the next entry if it is parked
    /// (the caller keeps the turn and writes it); otherwise frees the turn.
    func advance() -> ParkedEntry? {
        condition.locked {
            next += 1
            if let p = parked.removeValue(forKey: next) { return p }
            held = false
            condition.broadcast()
            return nil
        }
    }
}

/// Where one entry's bytes go while its file is compressed: straight into the archive once the
/// entry holds the turn (behind room left for its local header, written last, when the CRC and
/// sizes are known), in memory until then.
final class EntryOutput {
    private let writer: ZipWriter
    private let order: EntryOrder
    let index: Int
    let headerLength: Int
    private var pending: [UInt8] = []
    /// Where the entry's data starts in the archive, once it holds the turn.
    private var dataStart: UInt64?
    private var length: UInt64 = 0

    init(writer: ZipWriter, order: EntryOrder, index: Int, headerLength: Int) {
        self.writer = writer
        self.order = order
        self.index = index
        self.headerLength = headerLength
    }

    /// Takes the turn if it is free already: the head of the line streams from its first byte.
    func begin() throws {
        if order.tryHold(index) { enter() }
    }

    private func enter() {
        dataStart = writer.offset + UInt64(headerLength)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        if dataStart == nil {
            if pending.count + bytes.count <= EntryOrder.bytesPerJob && order.reserve(bytes.count) {
                pending.append(contentsOf: bytes)
                return
            }
            // Past its share: wait for the turn and go on in the archive.
            try order.hold(index)
            enter()
            if !pending.isEmpty {
                try pending.withUnsafeBytes { try writer.out.pwrite($0, at: dataStart!) }
                length = UInt64(pending.count)
                order.release(pending.count)
                pending = []
            }
        }
        try writer.out.pwrite(bytes, at: dataStart! + length)
        length += UInt64(bytes.count)
    }

    /// Forgets what was written: the entry is written again from its start.
    func rewind() {
        order.release(pending.count)
        pending = []
        length = 0
    }

    /// Puts the finished entry into the archive, now if it holds the turn or its turn is free,
    /// else parked for the thread that will hold it; then writes every parked entry whose turn
    /// follows.
    func finish(name: [UInt8], zip64: Bool, entry: CompressedEntry, results: EntryResults) throws {
        if let dataStart {
            let headerOffset = dataStart - UInt64(headerLength)
            let header = writer.localHeader(name, method: entry.method, crc: entry.crc, comp: entry.compressedSize,
                                            uncomp: entry.size, zip64: zip64)
            try writer.out.pwrite(header, at: headerOffset)
            writer.record(name, entry, zip64: zip64, headerOffset: headerOffset, index: index, results: results)
        } else {
            let p = ParkedEntry(index: index, name: name, zip64: zip64, entry: entry, bytes: pending)
            pending = []
            guard order.parkOrHold(p) else { return }
            try writer.place(p, results: results)
            order.release(p.bytes.count)
        }
        while let p = order.advance() {
            try writer.place(p, results: results)
            order.release(p.bytes.count)
        }
    }
}
