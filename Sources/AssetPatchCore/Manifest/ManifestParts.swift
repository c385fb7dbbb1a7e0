/// The manifest's JSON of a file and its location in the archive.
extension ArchiveLocation {
    func toJSON() -> JSON {
        .object([("header_offset", .int(Int64(headerOffset))), ("data_offset", .int(Int64(dataOffset))),
                 ("compressed_size", .int(Int64(compressedSize))), ("method", .int(Int64(method)))])
    }
}

extension ManifestFile {
    func toJSON() -> JSON {
        var pairs: [(String, JSON)] = [("path", .string(path)), ("size", .int(Int64(size))), ("sha256", .string(sha256))]
        if let location { pairs.append(("zip", location.toJSON())) }
        return .object(pairs)
    }
}

/// A shared object of the release that hosts load with `assetpatch_plugin_load`.
package struct PluginDeclaration: Sendable, Equatable {
    package var name: String
    /// The release-relative path of the shared object (one of `files`).
    package var path: String
    /// The symbol a load without a symbol name returns.
    package var entry: String
    /// The plugin's own version, for people and hosts (optional).
    package var version: String?
    /// A tag the host checks before using the plugin, e.g. "myhost-plugin-3" (optional).
    package var abi: String?

    package init(name: String, path: String, entry: String, version: String? = nil, abi: String? = nil) {
        self.name = name
        self.path = path
        self.entry = entry
        self.version = version
        self.abi = abi
    }

    func toJSON() -> JSON {
        var pairs: [(String, JSON)] = [("name", .string(name)), ("path", .string(path)), ("entry", .string(entry))]
        if let version { pairs.append(("version", .string(version))) }
        if let abi { pairs.append(("abi", .string(abi))) }
        return .object(pairs)
    }

    static func from(_ item: JSON) -> PluginDeclaration? {
        guard let name = item["name"]?.string, !name.isEmpty, name.utf8.count <= 127, let path = item["path"]?.string,
              let entry = item["entry"]?.string, !entry.isEmpty, entry.utf8.count <= 127 else { return nil }
        let version = item["version"]?.string, abi = item["abi"]?.string
        if let version, version.utf8.count > 63 { return nil }
        if let abi, abi.utf8.count > 63 { return nil }
        return PluginDeclaration(name: name, path: path, entry: entry, version: version, abi: abi)
    }
}
