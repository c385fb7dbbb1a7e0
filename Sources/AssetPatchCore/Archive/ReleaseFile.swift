/// Where one file's bytes sit in the release archive: enough to fetch its local header and
/// compressed data with one range request and inflate it without the zip's central directory.
package struct ArchiveLocation: Sendable, Equatable {
    /// Offset of the entry's local file header.
    package var headerOffset: UInt64
    /// Offset of its compressed data (after the local header, name and extra field).
    package var dataOffset: UInt64
    package var compressedSize: UInt64
    /// 0 stored, 8 deflate.
    package var method: UInt16

    package init(headerOffset: UInt64, dataOffset: UInt64, compressedSize: UInt64, method: UInt16) {
        self.headerOffset = headerOffset
        self.dataOffset = dataOffset
        self.compressedSize = compressedSize
        self.method = method
    }

    /// The bytes a range request fetches: local header through the end of the data.
    package var range: Range<UInt64> { headerOffset..<(dataOffset + compressedSize) }
    /// The entry's bytes in the archive: what that range request moves.
    package var storedBytes: UInt64 { dataOffset + compressedSize - headerOffset }
}

/// One file a release provides.
package struct ManifestFile: Sendable, Equatable {
    package var path: String
    package var size: UInt64
    /// Its content's digest, inline (`sha256` is its hex).
    package var digest: Sha256
    /// Where the file lies in the archive, when the manifest says (optional; `publish` writes it).
    package var location: ArchiveLocation?
    /// The number of the release group it is in (`GroupTable`), 0 for the base.
    package var group: UInt16 = 0

    package init(path: String, size: UInt64, digest: Sha256, location: ArchiveLocation? = nil, group: UInt16 = 0) {
        self.path = path
        self.size = size
        self.digest = digest
        self.location = location
        self.group = group
    }

    /// `sha256` must be 64 hex digits: parsers check the text they read before they make a file.
    package init(path: String, size: UInt64, sha256: String, location: ArchiveLocation? = nil, group: UInt16 = 0) {
        guard let digest = Sha256(hex: sha256) else { preconditionFailure("\"\(path)\": a sha256 that is not 64 hex digits") }
        self.init(path: path, size: size, digest: digest, location: location, group: group)
    }

    /// The digest as 64 lowercase hex digits (made on each use: key maps by `digest`).
    package var sha256: String { digest.hex }
}

extension ManifestFile {
    /// The archive entry holding a format-2 release's index: a format-1 manifest lists it as a
    /// file (for clients before 0.4), but it is not a resource.
    package static let indexEntryName = ".assetpatch/index"
}
