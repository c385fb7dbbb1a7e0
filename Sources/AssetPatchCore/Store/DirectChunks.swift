import Glibc

/// Chunks fetched now, written straight into the file being rebuilt, at their place in it,
/// instead of each into a chunk file of its own that the rebuild then copies and removes. A
/// fresh install by ranges of 1,000 files made, read and removed about 2,000 chunk files, and
/// ext4 paid for each new inode (it looks for recently deleted ones to reuse). The planner
/// fetches each chunk once, at its first place (`ChunkOrigin.archive`, `.linked`); a later place
/// of the same chunk (`.fetched`) copies it from there (`firstPlace`): from the file rebuilt
/// before, or from the one being rebuilt. A linked chunk is written in place only when it was
/// decoded as it arrived; one kept compressed is decoded by the rebuild as before, which keeps
/// it as a chunk file for later places.
///
/// The file being rebuilt, `<dir>/.<sha256>.rebuild`, is not synced: an attempt after an
/// interruption hashes its chunks' places again (`present`) and fetches only those that do not
/// match; the rebuild hashes the whole file either way.
struct DirectChunks {
    /// Where the chunk at an archive offset goes: the file being rebuilt and the offset in it.
    struct Place {
        /// The file being rebuilt, and where it is once rebuilt.
        let path: String
        let rebuilt: String
        let offset: UInt64
        let record: ChunkRecord
        /// A linked chunk's place (kept compressed when it arrives before its history).
        let linked: Bool
    }

    private let places: [UInt64: Place]
    /// Each chunk's first place, by archive offset (later places copy it from there).
    private let first: [ChunkID: UInt64]

    init(_ files: [ChunkedFile], dir: String) {
        var places: [UInt64: Place] = [:]
        var first: [ChunkID: UInt64] = [:]
        for f in files {
            let path = DirectChunks.partialPath(f.file, in: dir), rebuilt = dir + "/" + f.file.sha256
            var at: UInt64 = 0
            for (record, source) in f.chunks {
                switch source {
                case let .archive(offset), let .linked(offset):
                    let linked = if case .linked = source { true } else { false }
                    places[offset] = Place(path: path, rebuilt: rebuilt, offset: at, record: record, linked: linked)
                    if first[record.id] == nil { first[record.id] = offset }
                case .local, .fetched:
                    break
                }
                at += UInt64(record.size)
            }
        }
        self.places = places
        self.first = first
    }

    /// The file `f` is rebuilt in, among the fetched files in `dir`, until it is renamed to its sha256.
    static func partialPath(_ f: ManifestFile, in dir: String) -> String { dir + "/." + f.sha256 + ".rebuild" }

    /// The name a chunk written in place is known by among the chunks fetched (never a file's
    /// name: `ChunkPlanner.key` names are hex).
    static func key(_ archiveOffset: UInt64) -> String { "in-place:" + String(archiveOffset) }

    func place(_ archiveOffset: UInt64) -> Place? { places[archiveOffset] }

    /// Where a chunk fetched now for an earlier place lies: that place's archive offset (its
    /// `key` says whether it was written in place) and the place.
    func firstPlace(of id: ChunkID) -> (archiveOffset: UInt64, place: Place)? {
        guard let offset = first[id], let place = places[offset] else { return nil }
        return (offset, place)
    }

    /// The file a place's bytes are in now: the rebuilt file once it was renamed into place.
    static func holder(of place: Place) -> String { FS.exists(place.rebuilt) ? place.rebuilt : place.path }

    var isEmpty: Bool { places.isEmpty }

    /// The chunks an interrupted attempt wrote in place, found by hashing each place again
    /// (bytes a power cut lost, or never written, do not match): by `key`, their file.
    func present() -> [String: String] {
        var byPath: [String: [(UInt64, Place)]] = [:]
        for (offset, place) in places { byPath[place.path, default: []].append((offset, place)) }
        var out: [String: String] = [:]
        for (path, list) in byPath {
            // Only a regular file: never a link, and a FIFO planted there must not block.
            guard let file = try? File.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK), DirectChunks.isRegular(file) else { continue }
            for (offset, place) in list where place.record.checkedBytes(in: file, at: place.offset) != nil {
                out[DirectChunks.key(offset)] = path
            }
        }
        return out
    }

    /// Writes a chunk's verified bytes at its place (creating the file being rebuilt). `open`:
    /// the caller's file of the last write, reused while the place is in the same file.
    static func write(_ bytes: [UInt8], at place: Place, open: inout File?) throws {
        if open?.path != place.path { open = try openWritable(place.path, O_WRONLY) }
        try open!.pwrite(bytes, at: place.offset)
    }

    /// Opens (creating) a file being rebuilt for writing: never through a link, only a regular
    /// file, and made writable again where an interrupted attempt left it read-only (its mode
    /// is set to 0444 just before it is renamed; a kill between the two leaves it so, and a
    /// process not running as root could not write it again).
    static func openWritable(_ path: String, _ access: Int32) throws -> File {
        if let existing = try? File.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK), isRegular(existing) {
            var st = stat()
            if fstat(existing.fd, &st) == 0, st.st_mode & 0o200 == 0, fchmod(existing.fd, 0o600) != 0 { throw ioError("chmod", path) }
        }
        let file = try File.open(path, access | O_CREAT | O_NOFOLLOW | O_NONBLOCK, mode: 0o600)
        guard isRegular(file) else { throw AssetPatchError(.io, "\(path): not a regular file") }
        return file
    }

    private static func isRegular(_ file: File) -> Bool {
        var st = stat()
        return fstat(file.fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }
}

extension FilePlan {
    /// Finds the chunks an interrupted attempt wrote in place in `dir` (each hashed again) and
    /// leaves them out of the chunk ranges (`inPlace`): the plan's transfer, its metered check,
    /// its choice of route and the progress it reports count only what is still to fetch.
    mutating func leaveOutInPlace(dir: String) {
        guard !chunkRanges.isEmpty else { return }
        let direct = DirectChunks(chunked, dir: dir)
        let present = direct.isEmpty ? [:] : direct.present()
        inPlace = present
        guard !present.isEmpty else { return }
        chunkRanges = ChunkPlanner.leavingOut(chunkRanges) { present[DirectChunks.key($0.offset)] != nil }
    }
}
