import Glibc

/// A named set of a release's files that clients get apart from the rest: with every update
/// (`install`), or only when the host asks for it (`on_demand`: levels, languages, a scale of
/// art). Files in no group are the release's base. Each file is in at most one group.
package struct ReleaseGroup: Sendable, Equatable {
    package enum Delivery: UInt8, Sendable {
        case install = 0
        case onDemand = 1

        package var name: String { self == .install ? "install" : "on_demand" }
        package init?(name: String) {
            switch name {
            case "install": self = .install
            case "on_demand", "on-demand": self = .onDemand
            default: return nil
            }
        }
    }

    package var name: String
    package var delivery: Delivery
    /// How many files, their unpacked bytes, and their bytes in the archive (local headers
    /// included: what fetching every one of them by range moves at most).
    package var files: Int
    package var size: UInt64
    package var storedBytes: UInt64

    package init(name: String, delivery: Delivery, files: Int = 0, size: UInt64 = 0, storedBytes: UInt64 = 0) {
        self.name = name
        self.delivery = delivery
        self.files = files
        self.size = size
        self.storedBytes = storedBytes
    }

    /// 1 to 63 letters, digits, `.`, `_`, `-`, starting with a letter or digit (a channel's
    /// rule: the name is a directory's in the data directory).
    package static func isValidName(_ name: String) -> Bool { Channel.isValid(name) }

    /// At most this many groups: each on-demand group is a root of the release's name table,
    /// which holds 255 with the base and the bundle.
    package static let maxCount = 250
}

/// A release's groups and which file is in which: the index's group page (kind 4), which the
/// head names (`index.groups`) and which lies last in the index entry, so that clients before
/// groups, which never read it, install every file as before. Files are numbered in path
/// order (the file table's); the page holds the groups, then runs over the files: a count and a
/// group number (0: the base, N: the Nth group).
package struct GroupTable: Sendable, Equatable {
    package var groups: [ReleaseGroup]
    /// Each file's group number, in path order.
    package var fileGroups: [UInt16]

    package init(groups: [ReleaseGroup], fileGroups: [UInt16]) {
        self.groups = groups
        self.fileGroups = fileGroups
    }

    package func encode() -> [UInt8] {
        var out = IndexPage.magic
        out.append(4)
        out.putVarint(UInt64(groups.count))
        for g in groups {
            let name = Array(g.name.utf8)
            out.putVarint(UInt64(name.count))
            out += name
            out.append(g.delivery.rawValue)
            out.putVarint(UInt64(g.files))
            out.putVarint(g.size)
            out.putVarint(g.storedBytes)
        }
        var runs: [(count: UInt64, group: UInt16)] = []
        for g in fileGroups {
            if let last = runs.last, last.group == g { runs[runs.count - 1].count += 1 } else { runs.append((1, g)) }
        }
        out.putVarint(UInt64(runs.count))
        for r in runs {
            out.putVarint(r.count)
            out.putVarint(UInt64(r.group))
        }
        return out
    }

    /// Decodes a group page (its bytes checked against the head's reference); `files` is the
    /// number of files the index lists. Names must be valid and distinct, the runs must cover
    /// exactly the files, and each group's counts must be what its files add up to (checked by
    /// `check`). A page that breaks a rule is the publisher's fault: `ERR_MANIFEST`.
    package static func decode(_ bytes: [UInt8], files: Int, source: String) throws -> GroupTable {
        var r = PageReader(bytes: bytes, source: source)
        guard bytes.count >= 5, Array(bytes[0..<4]) == IndexPage.magic, bytes[4] == 4 else { throw r.fail("not a group page") }
        r.at = 5
        let count = try r.count(max: ReleaseGroup.maxCount)
        var groups: [ReleaseGroup] = []
        var names = Set<String>()
        for _ in 0..<count {
            let nameBytes = try r.bytes(try r.count(max: 63))
            guard let name = String(validating: nameBytes, as: UTF8.self), ReleaseGroup.isValidName(name), names.insert(name).inserted else {
                throw r.fail("group name \"\(String(decoding: nameBytes, as: UTF8.self))\" is invalid or repeated")
            }
            guard let delivery = ReleaseGroup.Delivery(rawValue: try r.byte()) else { throw r.fail("group \"\(name)\" has an unknown delivery") }
            let n = try r.varint(), size = try r.varint(), stored = try r.varint()
            guard n <= UInt64(files), size <= UInt64(Int64.max), stored <= UInt64(Int64.max) else {
                throw r.fail("group \"\(name)\" counts \(n) files of \(files), \(size) bytes, \(stored) stored")
            }
            groups.append(ReleaseGroup(name: name, delivery: delivery, files: Int(n), size: size, storedBytes: stored))
        }
        let runs = try r.count(max: files)
        var fileGroups: [UInt16] = []
        fileGroups.reserveCapacity(files)
        for _ in 0..<runs {
            let n = try r.varint(), g = try r.varint()
            guard n > 0, n <= UInt64(files - fileGroups.count), g <= UInt64(groups.count) else {
                throw r.fail("a run of \(n) files in group \(g) does not fit \(files) files and \(groups.count) groups")
            }
            fileGroups += repeatElement(UInt16(g), count: Int(n))
        }
        try r.end()
        guard fileGroups.count == files else { throw r.fail("the runs cover \(fileGroups.count) of \(files) files") }
        return GroupTable(groups: groups, fileGroups: fileGroups)
    }

    /// Each group's declared counts against what its files add up to (files in path order).
    package func check(_ files: [ManifestFile], source: String) throws {
        var counted = groups.map { ReleaseGroup(name: $0.name, delivery: $0.delivery) }
        for (f, g) in zip(files, fileGroups) where g > 0 {
            let i = Int(g) - 1
            let (size, o1) = counted[i].size.addingReportingOverflow(f.size)
            let (stored, o2) = counted[i].storedBytes.addingReportingOverflow(f.location?.storedBytes ?? 0)
            guard !o1, !o2 else { throw AssetPatchError(.manifest, "\(source): the files of group \"\(groups[i].name)\" add up past 64 bits") }
            counted[i].files += 1
            (counted[i].size, counted[i].storedBytes) = (size, stored)
        }
        for (declared, found) in zip(groups, counted) where declared != found {
            throw AssetPatchError(.manifest, "\(source): group \"\(declared.name)\" declares \(declared.files) files of \(declared.size) bytes (\(declared.storedBytes) in the archive); its files add up to \(found.files), \(found.size) (\(found.storedBytes))")
        }
    }
}
