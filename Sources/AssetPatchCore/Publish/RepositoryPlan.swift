/// What a client on an earlier version would get from a channel, worked out from the
/// repository alone (`assetpatch plan`): the release, whether a given rollout id is in its
/// rollout, and the bytes its update would transfer, from the two releases' file lists (files
/// the client has, by sha256, are not fetched).
package struct RepositoryPlan {
    package var release: ChannelRelease
    /// Files the client lacks, and the bytes their ranges span in the archive.
    package var fetchedFiles: [String]
    package var fetchBytes: UInt64
    /// Chunked files among them (the release index says which; without the archive, files of
    /// the default link threshold and more): an update fetches only their changed chunks;
    /// counted whole here (`fetchBytes` is then an upper bound).
    package var largeFiles: Int
    package var archiveBytes: UInt64
    /// With a rollout id: its bucket and the share in force, and whether it takes the release.
    package var rollout: (bucket: Int, percent: Double, takes: Bool)?

    /// `from`: the client's version (0: the bundle only, every file fetched). `chunked`: the
    /// release's chunked files (`chunkedFiles`), when the caller read them already.
    package static func make(repo: String, channel: String, from: Int64, rolloutID: String?,
                             chunked known: Set<String>? = nil) throws -> RepositoryPlan {
        guard let release = try ChannelManifests.read(repo: repo, channel: channel) else {
            throw AssetPatchError(.argument, "channel \"\(channel)\" has no manifest in \(repo)")
        }
        let chunked = known ?? chunkedFiles(repo: repo, release)
        var have = Set<String>()
        if from > 0 {
            guard let old = try ChannelManifests.history(repo: repo, version: from) else {
                throw AssetPatchError(.argument, "version \(from) is not in \(repo)/history")
            }
            have = Set((old.manifest["files"]?.array ?? []).compactMap { $0["sha256"]?.string })
        }
        var plan = RepositoryPlan(release: release, fetchedFiles: [], fetchBytes: 0, largeFiles: 0,
                                  archiveBytes: UInt64(release.manifest["archive"]?["size"]?.int64 ?? 0))
        for f in release.manifest["files"]?.array ?? [] {
            guard let path = f["path"]?.string, path != IndexLocation.entryName, let sha = f["sha256"]?.string, !have.contains(sha) else { continue }
            plan.fetchedFiles.append(path)
            if let z = f["zip"], let h = z["header_offset"]?.int64, let d = z["data_offset"]?.int64, let c = z["compressed_size"]?.int64 {
                plan.fetchBytes += UInt64(max(0, d + c - h))
            } else {
                plan.fetchBytes += UInt64(f["size"]?.int64 ?? 0)
            }
            if chunked.map({ $0.contains(path) }) ?? ((f["size"]?.int64 ?? 0) >= Int64(Publisher.defaultLinkThreshold)) {
                plan.largeFiles += 1
            }
        }
        if let id = rolloutID {
            let percent = release.rollout?.percent(at: unixTime()) ?? 100
            let bucket = Rollout.bucket(package: release.package, version: release.version, rolloutID: id)
            plan.rollout = (bucket, percent, Rollout.takes(bucket: bucket, percent: percent))
        }
        return plan
    }

    /// The paths of the release's chunked files (either index tree), read from its archive in
    /// the repository; nil without a head or the archive.
    package static func chunkedFiles(repo: String, _ release: ChannelRelease) -> Set<String>? {
        let archive = repo + "/archives/" + release.archiveSHA + ".zip"
        guard let head = release.head, let size = FS.fileSize(archive),
              let index = try? IndexLocation.decode(head["index"], archiveSize: size, source: archive),
              let read = try? IndexReader.read(archive: archive, index, source: archive, chunksWanted: { _ in false }) else { return nil }
        return Set(read.files.chunked.map { read.files.files[$0.file].path })
    }
}
