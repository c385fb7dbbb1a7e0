import Glibc
internal import CZlib

/// The data directory's outbox of outcome events (`OutcomeEvent`): appended by every client of
/// the data directory, read by the host in batches and acknowledged up to a sequence number.
///
/// ```text
/// DATA_DIR/events/log     one event a line: 8 hex digits of the line's CRC-32, a space, the JSON
/// DATA_DIR/events/acked   {"acked": N, "last": S, "dropped": D, "stream": X}, replaced atomically
/// DATA_DIR/events/lock    flock(2), held for each append, read, acknowledgement and compaction
/// ```
///
/// - Sequence numbers are per data directory, start at 1 and never repeat: the next is one
///   past the highest in the log or in `last` (the highest ever given when the log was last
///   compacted). `stream` (16 random hex digits, in every event) names this outbox: should it
///   be lost (the directory deleted or damaged), numbers start again under a new stream, so a
///   collector deduplicating by device, stream and seq drops nothing new.
/// - An append is one write(2) with O_APPEND: a process killed at any point leaves the line
///   whole or absent. A power cut can leave a torn or zeroed tail; lines failing their CRC are
///   skipped by readers, and the next append cuts the log back to its last whole line.
///   `durable` appends are fdatasync'ed before they return (the last event of each call the
///   host makes); the others are as durable as the page cache until then.
/// - What a read returns is fdatasync'ed first: an event the host forwarded is never lost, and
///   its number never given to another.
/// - Acknowledged events are never read again: `acked` is replaced (fsync'ed) before the
///   call returns; the log drops them at its next compaction.
/// - Bounded: when an append would take the log past `maxBytes`, acknowledged events go, and
///   then the oldest unacknowledged ones until the log is at most half of `maxBytes`; `dropped`
///   counts those (a gap in the sequence numbers the host reads).
package final class EventOutbox: @unchecked Sendable {  // no state of its own: every call locks the files
    package struct Info: Sendable, Equatable {
        /// Events not yet acknowledged.
        package var pending: UInt64 = 0
        /// The oldest and newest of them (0 when none).
        package var firstSeq: UInt64 = 0
        package var lastSeq: UInt64 = 0
        /// Everything up to this sequence number was acknowledged.
        package var acked: UInt64 = 0
        /// Unacknowledged events dropped to keep the outbox within its bound.
        package var dropped: UInt64 = 0
        /// The log's size on disk.
        package var bytes: UInt64 = 0
    }

    /// One event as read back: its sequence number and its JSON (no newline).
    package struct Entry: Sendable, Equatable {
        package var seq: UInt64
        package var json: String
    }

    package static let defaultMaxBytes = 1 << 20
    /// The largest bound (`events_max_bytes`); a log is read whole up to it and a line more.
    package static let maxBoundBytes = 1 << 30
    static let maxLogBytes = maxBoundBytes + maxLine
    /// Sequence numbers stay exact in every JSON reader (2^53).
    static let maxSeq: UInt64 = 1 << 53
    /// No event line is longer (events carry codes and names, never free text).
    static let maxLine = 8192

    let dir: String
    package let maxBytes: Int
    var logPath: String { dir + "/log" }
    var metaPath: String { dir + "/acked" }
    var lockPath: String { dir + "/lock" }

    package init(dir: String, maxBytes: Int = EventOutbox.defaultMaxBytes) {
        self.dir = dir
        self.maxBytes = max(maxBytes, 4 * EventOutbox.maxLine)
    }

    // MARK: The host's calls

    /// Appends the line `make` writes for the next sequence number and the outbox's stream;
    /// returns that number and the line.
    @discardableResult
    package func append(durable: Bool, _ make: (UInt64, String) -> String) throws -> Entry {
        try locked {
            let created = !FS.exists(logPath)
            let log = try File.open(logPath, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW, mode: 0o600)
            // A new log's name is made durable with its first line's bytes.
            defer { if created { try? FS.syncDirectory(dir) } }
            var size = try log.size()
            let tail = try lastWholeLine(log, size: size)
            if tail.end != size {
                try log.truncate(to: tail.end)
                size = tail.end
            }
            var meta = try readMeta(tail: tail.seq)
            let seq = max(tail.seq, meta.last) + 1
            guard seq <= EventOutbox.maxSeq else { throw AssetPatchError(.io, "\(logPath): sequence numbers exhausted (damaged?)") }
            let json = make(seq, meta.stream)
            let line = EventOutbox.frame(json)
            guard line.count <= EventOutbox.maxLine else {
                throw AssetPatchError(.internal, "an outcome event of \(line.count) bytes is over the limit of \(EventOutbox.maxLine)")
            }
            if Int(size) + line.count > maxBytes {
                meta.last = max(meta.last, seq - 1)
                try compact(&meta, room: line.count, mayDrop: true)
                let fresh = try File.open(logPath, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW, mode: 0o600)
                try write(fresh, line, durable: durable)
            } else {
                try write(log, line, durable: durable)
            }
            return Entry(seq: seq, json: json)
        }
    }

    /// The oldest unacknowledged events, in order: at most `limit` of them and at most
    /// `maxBytes` of JSON lines (newlines counted), but always the first when there is one.
    package func read(limit: Int = .max, maxBytes: Int = .max) throws -> [Entry] {
        try locked {
            let acked = try readMeta().acked
            var out: [Entry] = []
            var bytes = 0
            for e in try entries() where e.seq > acked {
                if out.count >= limit || (!out.isEmpty && bytes + e.json.utf8.count + 1 > maxBytes) { break }
                bytes += e.json.utf8.count + 1
                out.append(e)
            }
            // What the host reads is durable first: an event it forwarded can't be lost in a
            // power cut and its number given to another.
            if !out.isEmpty, let log = try? File.open(logPath, O_RDONLY | O_NOFOLLOW), fdatasync(log.fd) != 0 {
                throw ioError("fdatasync", logPath)
            }
            return out
        }
    }

    /// Acknowledges every event up to `seq`: they are never read again. An acknowledgement
    /// below an earlier one changes nothing; one past the newest event is refused (`.argument`).
    package func acknowledge(through seq: UInt64) throws {
        try locked {
            var meta = try readMeta()
            guard seq > meta.acked else { return }
            let log = try? File.open(logPath, O_RDONLY | O_NOFOLLOW)
            let newest = try max(meta.last, log.map { try lastWholeLine($0, size: try $0.size()).seq } ?? 0)
            guard seq <= newest else {
                throw AssetPatchError(.argument, "no event \(seq) to acknowledge: the newest is \(newest)")
            }
            meta.acked = seq
            meta.last = newest
            try writeMeta(meta)
            // The log sheds acknowledged events once they are a good part of it (never others:
            // another process may hold a larger bound).
            if let size = try log?.size(), Int(size) > maxBytes / 4 { try compact(&meta, room: 0, mayDrop: false) }
        }
    }

    package func info() throws -> Info {
        try locked {
            let meta = try readMeta()
            var info = Info(acked: meta.acked, dropped: meta.dropped, bytes: FS.fileSize(logPath) ?? 0)
            for e in try entries() where e.seq > meta.acked {
                if info.firstSeq == 0 { info.firstSeq = e.seq }
                info.lastSeq = e.seq
                info.pending += 1
            }
            return info
        }
    }

    // MARK: The files

    /// `crc32hex SP json LF`.
    static func frame(_ json: String) -> [UInt8] {
        let body = Array(json.utf8)
        return Array(hex8(crc(body)).utf8) + [0x20] + body + [0x0A]
    }

    /// The JSON of one framed line (without its newline), when its CRC holds.
    static func unframe(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        guard line.count > 9, line[line.startIndex + 8] == 0x20 else { return nil }
        let body = line[(line.startIndex + 9)...]
        guard let expected = UInt32(String(decoding: line.prefix(8), as: UTF8.self), radix: 16),
              String(decoding: line.prefix(8), as: UTF8.self) == hex8(expected),
              crc(Array(body)) == expected else { return nil }
        return body
    }

    /// The sequence number a line's JSON starts with (`{"seq":N,`), as `OutcomeEvent` writes it.
    static func seq(_ body: ArraySlice<UInt8>) -> UInt64? {
        let prefix = Array(#"{"seq":"#.utf8)
        guard body.starts(with: prefix) else { return nil }
        var n: UInt64 = 0
        var digits = 0
        for b in body.dropFirst(prefix.count) {
            guard b >= 0x30 && b <= 0x39 else { break }
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(b - 0x30))
            guard !o1, !o2 else { return nil }
            n = s
            digits += 1
        }
        return digits > 0 && n >= 1 && n <= maxSeq ? n : nil
    }

    /// Every whole, valid line of the log in order (lines failing their CRC are skipped).
    func entries() throws -> [Entry] {
        guard FS.exists(logPath) else { return [] }
        // By its size, whatever this process's bound: another may have a larger one.
        let bytes = try FS.readFile(logPath, limit: EventOutbox.maxLogBytes, followLinks: false)
        var out: [Entry] = []
        var start = 0
        while let nl = bytes[start...].firstIndex(of: 0x0A) {
            if let body = EventOutbox.unframe(bytes[start..<nl]), let seq = EventOutbox.seq(body),
               seq > (out.last?.seq ?? 0) {
                out.append(Entry(seq: seq, json: String(decoding: body, as: UTF8.self)))
            }
            start = nl + 1
        }
        return out
    }

    /// The end of the log's last valid line and its sequence number (0, 0 when there is none),
    /// read backwards from the end a window at a time.
    private func lastWholeLine(_ file: File, size: UInt64) throws -> (end: UInt64, seq: UInt64) {
        var end = size
        let window: UInt64 = 16384
        while end > 0 {
            let start = end > window ? end - window : 0
            let chunk = try file.preadExactly(Int(end - start), at: start, what: "the event log")
            // Lines that end inside the window, newest first; the first one may be cut at
            // `start` (it is read again with the next window).
            var lineEnd = chunk.lastIndex(of: 0x0A)
            while let e = lineEnd {
                let before = chunk[..<e].lastIndex(of: 0x0A)
                if before == nil && start > 0 { break }
                let lineStart = before.map { $0 + 1 } ?? 0
                if let body = EventOutbox.unframe(chunk[lineStart..<e]), let seq = EventOutbox.seq(body) {
                    return (start + UInt64(e) + 1, seq)
                }
                lineEnd = before
            }
            guard start > 0 else { break }
            // Read the cut line again whole in the next window; one longer than a line may be
            // is not an event (skipped, which also makes every window move back).
            if let first = chunk.firstIndex(of: 0x0A), first + 1 < EventOutbox.maxLine {
                end = start + UInt64(first) + 1
            } else {
                end = start
            }
        }
        return (0, 0)
    }

    private func write(_ file: File, _ line: [UInt8], durable: Bool) throws {
        try file.write(line)
        if durable, fdatasync(file.fd) != 0 { throw ioError("fdatasync", file.path) }
    }

    /// Drops acknowledged events and, with `mayDrop`, the oldest unacknowledged ones until the
    /// log and `room` more bytes fit in half the bound (or it is empty). The meta first, with
    /// the highest number given: once the log is replaced, nothing in it can lower the next
    /// sequence number. The drop count after: a kill between the two never counts a drop whose
    /// events are still there.
    private func compact(_ meta: inout Meta, room: Int, mayDrop: Bool) throws {
        let all = try entries()
        if let newest = all.last?.seq { meta.last = max(meta.last, newest) }
        var kept = all.filter { $0.seq > meta.acked }
        var size = kept.reduce(0) { $0 + EventOutbox.frame($1.json).count }
        var drop = 0
        while mayDrop, drop < kept.count, size + room > maxBytes / 2 {
            size -= EventOutbox.frame(kept[drop].json).count
            drop += 1
        }
        kept.removeFirst(drop)
        try writeMeta(meta)
        try FS.writeAtomically(logPath, kept.flatMap { EventOutbox.frame($0.json) }, mode: 0o600)
        if drop > 0 {
            meta.dropped = meta.dropped.addingReportingOverflow(UInt64(drop)).partialValue
            try writeMeta(meta)
        }
    }

    struct Meta {
        var acked: UInt64 = 0
        var last: UInt64 = 0
        var dropped: UInt64 = 0
        var stream: String
    }

    /// The acknowledgement record. Missing: a new outbox (a new stream). Unreadable for any other
    /// reason: thrown (never read as zero, which would hand out numbers again). Damaged (not
    /// its JSON, numbers out of range: it is only ever replaced whole, so only something else
    /// damages it): rebuilt from the log, every event in it read again under its stream.
    private func readMeta(tail: UInt64? = nil) throws -> Meta {
        let bytes: [UInt8]
        do { bytes = try FS.readFile(metaPath, limit: 4096, followLinks: false) } catch let e as AssetPatchError where e.errno == ENOENT {
            return Meta(stream: try streamFromLog() ?? EventOutbox.newStream())
        }
        func number(_ json: JSON, _ key: String) -> UInt64? {
            guard case let .number(t)? = json[key], let n = UInt64(t), n <= EventOutbox.maxSeq else { return nil }
            return n
        }
        if let json = try? JSONParser.parse(bytes), let acked = number(json, "acked"), let last = number(json, "last"),
           let dropped = number(json, "dropped"), let stream = json["stream"]?.string, Hex.isHex(stream, length: 16) {
            return Meta(acked: acked, last: last, dropped: dropped, stream: stream)
        }
        let newest = try tail ?? (entries().last?.seq ?? 0)
        return Meta(acked: 0, last: newest, dropped: 0, stream: try streamFromLog() ?? EventOutbox.newStream())
    }

    /// The stream the log's newest event names.
    private func streamFromLog() throws -> String? {
        guard let last = try entries().last, let json = try? JSONParser.parse(Array(last.json.utf8)),
              let stream = json["stream"]?.string, Hex.isHex(stream, length: 16) else { return nil }
        return stream
    }

    private static func newStream() -> String {
        var rng = SystemRandomNumberGenerator()
        return Hex.encode((0..<8).map { _ in UInt8.random(in: 0...255, using: &rng) })
    }

    private func writeMeta(_ m: Meta) throws {
        let json = JSON.object([("acked", .number(String(m.acked))), ("last", .number(String(m.last))),
                                ("dropped", .number(String(m.dropped))), ("stream", .string(m.stream))])
        try FS.writeAtomically(metaPath, Array((json.serialized() + "\n").utf8), mode: 0o600)
    }

    private func locked<T>(_ body: () throws -> T) throws -> T {
        if !FS.isDirectory(dir) {
            try FS.makeDirectories(dir, mode: 0o700)
            try FS.syncDirectory(FS.parent(of: dir))
        }
        let file = try File.open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600)
        if retryingEINTR({ flock(file.fd, LOCK_EX) }) != 0 { throw ioError("flock", file.path) }
        defer { flock(file.fd, LOCK_UN) }
        return try body()
    }

    private static func crc(_ bytes: [UInt8]) -> UInt32 {
        UInt32(truncatingIfNeeded: bytes.withUnsafeBytes { crc32(0, $0.baseAddress?.assumingMemoryBound(to: Bytef.self), UInt32($0.count)) })
    }

    private static func hex8(_ v: UInt32) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 8 - s.count) + s
    }
}

extension Store {
    /// This data directory's outbox (`EventOutbox`).
    package func outbox(maxBytes: Int = EventOutbox.defaultMaxBytes) -> EventOutbox {
        EventOutbox(dir: root + "/events", maxBytes: maxBytes)
    }
}
