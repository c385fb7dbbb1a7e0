import Glibc

/// One `publish --group NAME=PATTERN` (or `--install-group`): the files whose paths match one
/// of its patterns, unless an earlier rule took them, make group `name`.
package struct GroupRule: Sendable, Equatable {
    package var name: String
    package var delivery: ReleaseGroup.Delivery
    /// Shell patterns (fnmatch(3)) matched against the whole path, `*` and `?` matching `/` too:
    /// `levels/2/*` is everything under `levels/2`.
    package var patterns: [String]

    package init(name: String, delivery: ReleaseGroup.Delivery, patterns: [String]) {
        self.name = name
        self.delivery = delivery
        self.patterns = patterns
    }

    func matches(_ path: String) -> Bool {
        patterns.contains { fnmatch($0, path, 0) == 0 }
    }

    /// The scale group of a variant file: `scale-2x` for `a@2x.png` or `a@2x`, `scale-1x` for
    /// a plain file that has a scaled sibling; nil for other files. `paths` are the release's.
    static func scaleGroup(_ path: String, _ paths: Set<String>) -> String? {
        if let scale = scale(of: path) { return "scale-\(scale)x" }
        // A plain file beside scaled variants: what a device of scale 1 resolves.
        for n in 2...4 where paths.contains(ResourceName.applyingVariant(path, "@\(n)x")) { return "scale-1x" }
        return nil
    }

    /// N of a `@Nx` suffix (1 to 9) at the end of the name or before its extension.
    static func scale(of path: String) -> Int? {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let stem = name.lastIndex(of: ".").map { String(name[..<$0]) } ?? name
        let b = Array(stem.utf8)
        guard b.count >= 4, b[b.count - 1] == UInt8(ascii: "x"), b[b.count - 3] == UInt8(ascii: "@"),
              (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(b[b.count - 2]) else { return nil }
        return Int(b[b.count - 2] - UInt8(ascii: "0"))
    }

    /// The group table of `files` (in path order, with their locations), nil when no rule
    /// applies and no scale group forms. A rule that matches no file is an error: a typo would
    /// otherwise ship a level in the base.
    static func assign(_ files: [ManifestFile], _ rules: [GroupRule], scales: Bool) throws -> GroupTable? {
        guard !rules.isEmpty || scales else { return nil }
        var seen = Set<String>()
        for r in rules {
            guard ReleaseGroup.isValidName(r.name) else {
                throw AssetPatchError(.argument, "--group \(r.name): 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit")
            }
            guard seen.insert(r.name).inserted else { throw AssetPatchError(.argument, "--group \(r.name): declared twice") }
        }
        var groups = rules.map { ReleaseGroup(name: $0.name, delivery: $0.delivery) }
        let paths = scales ? Set(files.map(\.path)) : []
        var fileGroups: [UInt16] = []
        fileGroups.reserveCapacity(files.count)
        for f in files {
            var g = rules.firstIndex { $0.matches(f.path) }
            if g == nil, scales, let name = scaleGroup(f.path, paths) {
                if let i = groups.firstIndex(where: { $0.name == name }) {
                    g = i
                } else {
                    guard !seen.contains(name) else { throw AssetPatchError(.argument, "--group \(name): the name is a scale group's") }
                    groups.append(ReleaseGroup(name: name, delivery: .onDemand))
                    g = groups.count - 1
                }
            }
            guard let g else { fileGroups.append(0); continue }
            groups[g].files += 1
            groups[g].size += f.size
            groups[g].storedBytes += f.location?.storedBytes ?? 0
            fileGroups.append(UInt16(g + 1))
        }
        if let empty = groups.first(where: { $0.files == 0 }) {
            throw AssetPatchError(.argument, "--group \(empty.name): no file of the release matches \(rules.first { $0.name == empty.name }?.patterns.joined(separator: ", ") ?? "")")
        }
        guard groups.count <= ReleaseGroup.maxCount else {
            throw AssetPatchError(.argument, "\(groups.count) groups: at most \(ReleaseGroup.maxCount)")
        }
        return groups.isEmpty ? nil : GroupTable(groups: groups, fileGroups: fileGroups)
    }
}
