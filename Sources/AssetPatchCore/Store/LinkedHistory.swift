import Glibc

/// The bytes of a new file before one of its linked chunks (chunks that share history: each
/// decodes after the 32 KiB before it), when they are on disk already: the installed bytes the
/// plan copies, chunks kept under the update's chunk directory (fetched and checked, or
/// decoded), and chunks written in place in the file being rebuilt (`DirectChunks`). With them
/// a linked chunk is decoded and checked against its sha256 as it arrives, like a chunk that
/// decodes on its own, so a source that sends other bytes is known at once (and the next
/// source asked); without them its compressed bytes are kept and decoded by the
/// rebuild. Every piece is checked against its chunk's sha256 before it is used: history that
/// does not match is no history, never a reason to blame the server.
struct LinkedHistory {
    private let files: [ChunkedFile]
    private let dir: String
    /// Each linked chunk to fetch, by archive offset: its file and its place in it.
    private let places: [UInt64: (file: Int, chunk: Int)]
    /// Chunks written in place: read from the file being rebuilt.
    private let direct: DirectChunks?

    init(_ files: [ChunkedFile], dir: String, direct: DirectChunks? = nil) {
        self.files = files
        self.dir = dir
        self.direct = direct
        var places: [UInt64: (file: Int, chunk: Int)] = [:]
        for (i, f) in files.enumerated() where f.linked {
            for (j, source) in f.sources.enumerated() {
                if case let .linked(offset) = source { places[offset] = (i, j) }
            }
        }
        self.places = places
    }

    /// The last 32 KiB (or fewer, near the file's start) before the linked chunk at archive
    /// `offset`; nil when a piece of them is not on disk or does not match its chunk.
    func before(_ offset: UInt64) -> [UInt8]? {
        guard let (i, j) = places[offset] else { return nil }
        let f = files[i]
        var pieces: [[UInt8]] = []
        var have = 0
        var k = j
        while k > 0 && have < ChunkDecoder.historyBytes {
            k -= 1
            let record = f.records[k]
            guard let bytes = piece(f, record, f.sources[k]) else { return nil }
            pieces.append(bytes)
            have += bytes.count
        }
        // The pieces were gathered backwards: the history is their last bytes, in file order.
        var history: [UInt8] = []
        history.reserveCapacity(min(have, ChunkDecoder.historyBytes))
        var skip = max(0, have - ChunkDecoder.historyBytes)
        for piece in pieces.reversed() {
            let drop = min(skip, piece.count)
            history.append(contentsOf: piece[drop...])
            skip -= drop
        }
        return history
    }

    /// One chunk's bytes, checked against its sha256.
    private func piece(_ f: ChunkedFile, _ record: ChunkRecord, _ source: ChunkOrigin) -> [UInt8]? {
        var path: String, at: UInt64
        switch source {
        case let .local(file, offset): (path, at) = (f.localFiles[Int(file)], offset)
        case .fetched:
            (path, at) = (dir + "/" + record.id.hex, 0)
            if !FS.exists(path), let (_, place) = direct?.firstPlace(of: record.id) { (path, at) = (DirectChunks.holder(of: place), place.offset) }
        case let .archive(offset), let .linked(offset):
            (path, at) = (dir + "/" + record.id.hex, 0)
            // Written in place (or not yet: then it does not match, and it is no history).
            if !FS.exists(path), let place = direct?.place(offset) { (path, at) = (DirectChunks.holder(of: place), place.offset) }
        }
        guard let file = try? File.openRead(path) else { return nil }
        return record.checkedBytes(in: file, at: at)
    }
}
