/// The history's files that change in place, merged when two publishers each changed theirs:
/// the signing log (`history/signings.jsonl`, one line per signing) keeps every line of both,
/// the bucket's first; a release's offer list (`history/N/channels.json`) every channel of
/// both, in the order they offered it. Neither is signed or read by clients; both are the
/// publisher's record, which `promote --version` and the report read.
package enum HistoryMerge {
    /// `theirs` with what only `ours` holds added; nil for a file this does not know how to merge.
    /// At most this much of either: a log of 100,000 signings, an offer list of every channel.
    static let maxBytes = 32 << 20

    package static func merge(_ path: String, ours: [UInt8], theirs: [UInt8]) -> [UInt8]? {
        guard ours.count <= maxBytes, theirs.count <= maxBytes else { return nil }
        if path == "history/signings.jsonl" {
            // Lines that are JSON objects only, in the order of their times (the report draws
            // them so); a line either side holds is kept once.
            let lines = { (b: [UInt8]) in
                b.split(separator: 0x0A, omittingEmptySubsequences: true).map(Array.init).filter { (try? JSONParser.parse($0))?.isObject == true }
            }
            let have = Set(lines(theirs))
            var out = lines(theirs)
            for line in lines(ours) where !have.contains(line) { out.append(line) }
            let time = { (line: [UInt8]) in (try? JSONParser.parse(line))?["time"]?.string.flatMap(RFC3339.parse) ?? 0 }
            out = out.enumerated().sorted { (time($0.element), $0.offset) < (time($1.element), $1.offset) }.map(\.element)
            return out.isEmpty ? [] : out.joined(separator: [0x0A]) + [0x0A]
        }
        if path.hasPrefix("history/") && path.hasSuffix("/channels.json") {
            guard let a = (try? JSONParser.parse(theirs))?["channels"]?.array?.compactMap(\.string),
                  let b = (try? JSONParser.parse(ours))?["channels"]?.array?.compactMap(\.string) else { return nil }
            var all: [String] = []
            for c in a + b where Channel.isValid(c) && !all.contains(c) { all.append(c) }
            return Array((JSON.object([("channels", .array(all.map { .string($0) }))]).serialized(indent: 2) + "\n").utf8)
        }
        return nil
    }
}
