/// What resolving reads: the active release's index, the bundle's, and the variant order.
/// Immutable; the client replaces it as a whole (one reference swap under a short lock) when a
/// release activates or the variants change, so a lookup costs one retain/release and never
/// waits for an update.
final class ResolveView: @unchecked Sendable {  // immutable after init; the suffix buffers are never written again
    let release: ResolveIndex?
    let bundle: ResolveIndex?
    /// The variant suffixes in order; an empty one is the plain name.
    let variants: [[UInt8]]
    let maxSuffix: Int
    let activeVersion: Int64
    /// The variant suffixes back to back in one buffer, and their (offset, length): the lookup
    /// loop walks raw memory instead of retaining an array of arrays.
    private let suffixes: UnsafeMutableRawBufferPointer
    private let spans: UnsafeMutableBufferPointer<(offset: Int, length: Int)>

    init(release: ResolveIndex?, bundle: ResolveIndex?, variants: [[UInt8]], activeVersion: Int64) {
        self.release = release
        self.bundle = bundle
        self.variants = variants
        self.maxSuffix = variants.reduce(0) { max($0, $1.count) }
        self.activeVersion = activeVersion
        suffixes = .allocate(byteCount: max(1, variants.reduce(0) { $0 + $1.count }), alignment: 1)
        spans = .allocate(capacity: max(1, variants.count))
        var offset = 0
        for (i, v) in variants.enumerated() {
            v.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: suffixes[offset..<offset + $0.count]).copyMemory(from: $0) }
            spans[i] = (offset, v.count)
            offset += v.count
        }
    }

    deinit {
        suffixes.deallocate()
        spans.deallocate()
    }

    func with(release: ResolveIndex?? = nil, variants: [[UInt8]]? = nil, activeVersion: Int64? = nil) -> ResolveView {
        ResolveView(release: release ?? self.release, bundle: bundle, variants: variants ?? self.variants,
                    activeVersion: activeVersion ?? self.activeVersion)
    }

    /// The path of the first candidate found, release before bundle.
    @inline(__always)
    private func find(_ candidate: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        if let r = release, let p = r.lookup(candidate) { return p }
        if let b = bundle, let p = b.lookup(candidate) { return p }
        return nil
    }

    /// Resolves `name` (raw UTF-8): for each variant in order, the release, then the bundle.
    /// Writes the NUL-terminated absolute path into `out` when it fits; `length` gets the
    /// path's length without the NUL (also for `.range`, so a caller can size its buffer).
    /// Non-generic, and allocation- and syscall-free: the hot path of every host.
    func resolve(_ name: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer?, capacity: Int,
                 length: inout Int) throws(AssetPatchError) {
        guard ResourceName.isValid(name) else {
            throw AssetPatchError(.argument, "invalid resource name \"\(String(decoding: name, as: UTF8.self))\"")
        }
        // Room for the longest candidate; on the stack for any ordinary name.
        let found = withUnsafeTemporaryAllocation(byteCount: name.count + maxSuffix, alignment: 1) { scratch in
            firstMatch(name, scratch.baseAddress!)
        }
        guard let path = found else {
            throw AssetPatchError(.notFound, "no resource \"\(String(decoding: name, as: UTF8.self))\" in the active release or the bundle")
        }
        length = path.count
        guard let out, capacity > path.count else {
            throw AssetPatchError(.range, "path of \(path.count) bytes for \"\(String(decoding: name, as: UTF8.self))\" does not fit in \(capacity)")
        }
        out.copyMemory(from: path.baseAddress!, byteCount: path.count)
        out.storeBytes(of: 0, toByteOffset: path.count, as: UInt8.self)
    }

    @inline(__always)
    private func firstMatch(_ name: UnsafeRawBufferPointer, _ scratch: UnsafeMutableRawPointer) -> UnsafeRawBufferPointer? {
        var at = -1
        for i in 0..<variants.count {
            let (offset, length) = spans[i]
            let candidate: UnsafeRawBufferPointer
            if length == 0 {
                candidate = name
            } else {
                if at < 0 {
                    at = ResourceName.suffixInsertionPoint(name)
                    ResourceName.beginVariants(of: name, at: at, into: scratch)
                }
                let suffix = UnsafeRawBufferPointer(rebasing: suffixes[offset..<offset + length])
                candidate = ResourceName.variant(of: name, at: at, suffix: suffix, into: scratch)
            }
            if let p = find(candidate) { return p }
        }
        return nil
    }
}
