import Glibc
internal import CSystem

/// A plugin as the host may list it.
package struct PluginListing: Sendable, Equatable {
    package var name: String
    package var version: String?
    package var entry: String
    package var abi: String?
}

/// Loads plugins of the active release from verified bytes only.
///
/// The release's file is copied into a sealed memfd while its sha256 is computed; the copy is
/// loaded only if the digest and size match the release record, and after its ELF header says
/// it is a shared object for this machine. The seals (no write, no resize) make the checked
/// bytes the mapped bytes: a file swapped or changed on disk after the check cannot reach
/// `dlopen`, and a truncated file is refused instead of raising SIGBUS in the host. Each load
/// maps a new memfd (`/proc/self/fd/N`, kept open so the name is never reused), so a newer
/// release's plugin really runs its new code; the same plugin of the same release returns the
/// handle loaded first. Loaded code stays loaded until the process exits.
final class PluginLoader: @unchecked Sendable {  // `loaded` is only touched under `lock`
    private let lock = Locked<[String: UnsafeMutableRawPointer]>([:])

    func list(_ served: (ref: ReleaseRef, record: ReleaseRecord)?) throws -> [PluginListing] {
        guard let served else { return [] }
        return served.record.plugins.map { PluginListing(name: $0.name, version: $0.version, entry: $0.entry, abi: $0.abi) }
    }

    /// The address of `symbol` (nil: the declared entry) in plugin `name` of the release the
    /// client serves. Loaded once per release and plugin; a load of one already loaded reads
    /// nothing from disk (the record is the served release's, read once).
    func load(_ store: Store, _ served: (ref: ReleaseRef, record: ReleaseRecord, localGroups: Set<String>)?, name: String, symbol: String?,
              allowUnsigned: Bool) throws -> UnsafeMutableRawPointer {
        guard let served else {
            throw AssetPatchError(.notFound, "plugin \"\(name)\": only the bundle is served, which has no plugins")
        }
        let active = served.ref
        let info = served.record
        guard let decl = info.plugins.first(where: { $0.name == name }) else {
            throw AssetPatchError(.notFound, "plugin \"\(name)\" is not declared by version \(active.version)")
        }
        guard info.signatureVerified || allowUnsigned else {
            throw AssetPatchError(.signature, "plugin \"\(name)\": version \(active.version) was not signature-verified (set public_keys, or allow_unsigned_plugins=1)")
        }
        let key = active.id + "/" + name
        let handle = try lock.withLock { loaded -> UnsafeMutableRawPointer in
            if let h = loaded[key] { return h }
            guard let file = info.files.first(where: { $0.path == decl.path }) else {
                throw AssetPatchError(.notFound, "plugin \"\(name)\": \(decl.path) is not a file of version \(active.version)")
            }
            if let group = info.onDemandGroup(of: file), !served.localGroups.contains(group.name) {
                throw AssetPatchError(.notLocal, "plugin \"\(name)\": \(decl.path) is in group \(group.name), which is not on disk: fetch it first (assetpatch_group_fetch)")
            }
            let h = try PluginLoader.open(store.releaseDir(active.id) + "/" + info.relativePath(of: file), file, name: name)
            loaded[key] = h
            return h
        }
        let wanted = symbol ?? decl.entry
        guard let address = dlsym(handle, wanted) else {
            throw AssetPatchError(.notFound, "plugin \"\(name)\" has no symbol \(wanted)")
        }
        return address
    }

    private static func open(_ path: String, _ file: ManifestFile, name: String) throws -> UnsafeMutableRawPointer {
        let source: File
        do { source = try File.open(path, O_RDONLY | O_NOFOLLOW) } catch let e as AssetPatchError {
            throw AssetPatchError(.integrity, "plugin \"\(name)\": \(e.message) (the installed file is gone)")
        }
        let size = try source.size()
        guard size == file.size else {
            throw AssetPatchError(.integrity, "plugin \"\(name)\": \(path) is \(size) bytes, installed as \(file.size): changed on disk")
        }
        let fd = csystem_memfd_sealable("assetpatch-plugin")
        guard fd >= 0 else { throw ioError("memfd_create", name) }
        var keep = false
        defer { if !keep { close(fd) } }
        let copy = File(fd: dup(fd), path: "memfd:" + name)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(size))
        let digest = try Digest(.sha256)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var offset: UInt64 = 0
        while offset < size {
            let n = try source.pread(into: buffer, at: offset)
            if n == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            try copy.pwrite(chunk, at: offset)
            digest.update(chunk)
            bytes.append(contentsOf: chunk)
            offset += UInt64(n)
        }
        let sha = digest.finalHex()
        guard offset == file.size, sha == file.sha256 else {
            throw AssetPatchError(.integrity, "plugin \"\(name)\": \(path) has sha256 \(sha), installed as \(file.sha256): changed on disk")
        }
        guard csystem_seal_all(fd) == 0 else { throw ioError("seal", name) }
        let elf = try ELFInfo.parse(bytes)
        guard elf.machine == ELFInfo.hostMachine else {
            throw AssetPatchError(.archive, "plugin \"\(name)\" is built for \(elf.machineName), this process runs on \(ELFInfo.name(of: ELFInfo.hostMachine))")
        }
        dlerror()
        guard let handle = dlopen("/proc/self/fd/\(fd)", RTLD_NOW | RTLD_LOCAL) else {
            let why = dlerror().map { String(cString: $0) } ?? "unknown error"
            throw AssetPatchError(.archive, "plugin \"\(name)\" does not load: \(why)")
        }
        keep = true  // the name /proc/self/fd/N must stay unique while the code is mapped
        return handle
    }
}
