extension Array where Element == UInt8 {
    /// Where `needle` first occurs at or after `start`; nil when it does not (an empty needle
    /// is not found).
    package func firstIndex(of needle: [UInt8], from start: Int = 0) -> Int? {
        guard !needle.isEmpty, needle.count <= count else { return nil }
        var i = Swift.max(0, start)
        while i + needle.count <= count {
            if self[i] == needle[0] && self[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }
}
