import AssetPatchCore
import CAssetPatchABI

// Header section "Releases".

@c @implementation
public func assetpatch_current(_ c: OpaquePointer?, _ version: UnsafeMutablePointer<Int64>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_current: client is NULL") }
    guard let version else { return argumentError("assetpatch_current: version is NULL") }
    version.pointee = h.client.currentVersion
    return Status.ok.rawValue
}

@c @implementation
public func assetpatch_mark_good(_ c: OpaquePointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_mark_good: client is NULL") }
    return status {
        try h.client.markGood()
        return .ok
    }
}

@c @implementation
public func assetpatch_rollback(_ c: OpaquePointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_rollback: client is NULL") }
    return status {
        try h.client.rollback()
        return .ok
    }
}

@c @implementation
public func assetpatch_reset(_ c: OpaquePointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_reset: client is NULL") }
    return status {
        try h.client.reset()
        return .ok
    }
}

@c @implementation
public func assetpatch_lifecycle_get(_ c: OpaquePointer?, _ out: UnsafeMutablePointer<assetpatch_lifecycle>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_lifecycle_get: client is NULL") }
    guard let out else { return argumentError("assetpatch_lifecycle_get: out is NULL") }
    return status {
        _ = try callerSize(out, what: "assetpatch_lifecycle_get", minimum: Int(ASSETPATCH_LIFECYCLE_SIZE_0_4_0))
        let s = try h.client.lifecycle()
        var l = assetpatch_lifecycle()
        l.active_version = s.activeVersion
        l.pending_version = s.pendingVersion
        l.active_marked_good = s.activeMarkedGood ? 1 : 0
        l.launches = UInt32(clamping: s.launches)
        l.max_failed_launches = UInt32(clamping: s.maxFailedLaunches)
        l.bad_versions = UInt32(clamping: s.badVersions)
        if let r = s.lastRollback {
            l.rolled_back_from = r.from
            l.rolled_back_to = r.to
            l.rolled_back_at = r.time
            withUnsafeMutableBytes(of: &l.rollback_reason) { copyTruncated(r.reason, into: $0) }
        }
        try writeSized(l, to: out, what: "assetpatch_lifecycle_get", minimum: Int(ASSETPATCH_LIFECYCLE_SIZE_0_4_0))
        return .ok
    }
}

@c @implementation
public func assetpatch_disk_usage(_ c: OpaquePointer?, _ releases: UnsafeMutablePointer<UInt64>?, _ downloads: UnsafeMutablePointer<UInt64>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_disk_usage: client is NULL") }
    let u = h.client.store.usage()
    releases?.pointee = u.releases
    downloads?.pointee = u.downloads
    return Status.ok.rawValue
}

/// Copies `text` NUL-terminated into a fixed C array: whole characters only, cut to fit.
func copyTruncated(_ text: String, into buffer: UnsafeMutableRawBufferPointer) {
    var bytes: [UInt8] = []
    for scalar in text.unicodeScalars {
        let encoded = Array(String(scalar).utf8)
        if bytes.count + encoded.count > buffer.count - 1 { break }
        bytes += encoded
    }
    buffer.copyBytes(from: bytes)
    buffer[bytes.count] = 0
}

/// The summary `which` names, or the status that says why there is none.
private func summary(_ h: Handle, _ which: CInt, _ fn: String) throws -> ReleaseSummary {
    guard let w = WhichRelease(rawValue: which) else { throw AssetPatchError(.argument, "\(fn): unknown release \(which)") }
    guard let s = try h.client.release(w) else {
        let what = w == .active ? "only the bundle is served" : w == .pending ? "no release is pending" : "no check has found a newer release"
        throw AssetPatchError(.notFound, "\(fn): \(what)")
    }
    return s
}

@c @implementation
public func assetpatch_release_get(_ c: OpaquePointer?, _ which: CInt, _ out: UnsafeMutablePointer<assetpatch_release_info>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_release_get: client is NULL") }
    guard let out else { return argumentError("assetpatch_release_get: out is NULL") }
    return status {
        _ = try callerSize(out, what: "assetpatch_release_get", minimum: Int(ASSETPATCH_RELEASE_INFO_SIZE_0_4_0))
        let s = try summary(h, which, "assetpatch_release_get")
        var info = assetpatch_release_info()
        info.version = s.version
        info.created = s.created ?? 0
        info.signature_verified = s.signatureVerified ? 1 : 0
        info.marked_good = s.markedGood ? 1 : 0
        info.mandatory = s.mandatory ? 1 : 0
        info.has_notes = s.notes == nil ? 0 : 1
        withUnsafeMutableBytes(of: &info.label) { copyTruncated(s.label ?? "", into: $0) }
        withUnsafeMutableBytes(of: &info.channel) { copyTruncated(s.channel, into: $0) }
        info.rollout_basis_points = s.rolloutBasisPoints ?? -1
        try writeSized(info, to: out, what: "assetpatch_release_get", minimum: Int(ASSETPATCH_RELEASE_INFO_SIZE_0_4_0))
        return .ok
    }
}

@c @implementation
public func assetpatch_release_notes(_ c: OpaquePointer?, _ which: CInt, _ buf: UnsafeMutablePointer<CChar>?, _ cap: Int,
                                     _ len: UnsafeMutablePointer<Int>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_release_notes: client is NULL") }
    return status {
        let notes = Array((try summary(h, which, "assetpatch_release_notes").notes ?? "").utf8)
        len?.pointee = notes.count
        guard let buf, cap > notes.count else {
            throw AssetPatchError(.range, "assetpatch_release_notes: \(notes.count + 1) bytes needed, \(cap) given")
        }
        notes.withUnsafeBytes { UnsafeMutableRawPointer(buf).copyMemory(from: $0.baseAddress!, byteCount: notes.count) }
        buf[notes.count] = 0
        return .ok
    }
}
