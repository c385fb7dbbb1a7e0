/// A file at `root + path`: `root` is a directory ending in "/" (or ""), shared by many.
/// Cut and compared as bytes: as Characters a "/" followed by a combining mark is one, and
/// Strings compare by canonical equivalence, where the file system sees other names.
struct FilePlace: Equatable {
    let root: String
    let path: String

    var full: String { root + path }
    /// The directory `root + directory`, and the name in it.
    var directory: Substring.UTF8View {
        let bytes = path.utf8
        return Substring(path).utf8[..<(bytes.lastIndex(of: UInt8(ascii: "/")) ?? bytes.startIndex)]
    }
    var name: Substring.UTF8View {
        let bytes = path.utf8
        return Substring(path).utf8[(bytes.lastIndex(of: UInt8(ascii: "/")).map { bytes.index(after: $0) } ?? bytes.startIndex)...]
    }
    /// In the same directory as `other` (compares without making either directory's path).
    func sharesDirectory(with other: FilePlace) -> Bool {
        root.utf8.elementsEqual(other.root.utf8) && directory.elementsEqual(other.directory)
    }
    /// Without a trailing "/" (which would have `O_NOFOLLOW` follow a last component that is
    /// a link).
    var directoryPath: String {
        let dir = directory
        if !dir.isEmpty { return root + String(decoding: dir, as: UTF8.self) }
        return root.utf8.last == UInt8(ascii: "/") && root.utf8.count > 1 ? String(decoding: root.utf8.dropLast(), as: UTF8.self) : root
    }

    static func == (a: FilePlace, b: FilePlace) -> Bool { a.root.utf8.elementsEqual(b.root.utf8) && a.path.utf8.elementsEqual(b.path.utf8) }
}
