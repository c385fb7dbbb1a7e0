import AssetPatchCore
import CAssetPatchABI

// Header section "Updating".

/// Wraps a C progress callback; the C struct lives on the stack of each call.
func progressHandler(_ fn: assetpatch_progress_fn?, _ userdata: UnsafeMutableRawPointer?) -> ProgressHandler? {
    guard let fn else { return nil }
    let user = UnsafeMutableRawPointer(userdata)
    return { p in
        var cp = assetpatch_progress(phase: p.phase.rawValue, bytes_done: p.bytesDone, bytes_total: p.bytesTotal,
                                     files_done: p.filesDone, files_total: p.filesTotal, paused: p.paused ? 1 : 0,
                                     files_reused: p.filesReused, bytes_reused: p.bytesReused)
        return fn(&cp, user) != 0
    }
}

@c @implementation
public func assetpatch_check(_ c: OpaquePointer?, _ version: UnsafeMutablePointer<Int64>?, _ downloadBytes: UnsafeMutablePointer<UInt64>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_check: client is NULL") }
    return status {
        guard let r = try h.client.check() else { return .noUpdate }
        version?.pointee = r.version
        downloadBytes?.pointee = r.downloadBytes
        return .ok
    }
}

@c @implementation
public func assetpatch_update(_ c: OpaquePointer?, _ fn: assetpatch_progress_fn?, _ userdata: UnsafeMutableRawPointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_update: client is NULL") }
    return status {
        try h.client.update(progress: progressHandler(fn, userdata)) ? .ok : .noUpdate
    }
}

@c @implementation
public func assetpatch_update_start(_ c: OpaquePointer?, _ fn: assetpatch_progress_fn?, _ userdata: UnsafeMutableRawPointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_update_start: client is NULL") }
    return status {
        try h.client.startUpdate(progress: progressHandler(fn, userdata))
        return .ok
    }
}

@c @implementation
public func assetpatch_update_wait(_ c: OpaquePointer?, _ timeoutMs: CInt, _ result: UnsafeMutablePointer<CInt>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_update_wait: client is NULL") }
    return status {
        guard let (s, message) = try h.client.waitUpdate(timeoutMs: Int(timeoutMs)) else {
            throw AssetPatchError(.busy, "the update is still running")
        }
        if s.rawValue < 0 { setLastError(message) }
        result?.pointee = s.rawValue
        return .ok
    }
}

@c @implementation
public func assetpatch_pause(_ c: OpaquePointer?) {
    handle(c)?.client.transfers.pause()
}

@c @implementation
public func assetpatch_resume(_ c: OpaquePointer?) {
    handle(c)?.client.transfers.resume()
}

@c @implementation
public func assetpatch_cancel(_ c: OpaquePointer?) {
    handle(c)?.client.cancel()
}

@c @implementation
public func assetpatch_last_check(_ c: OpaquePointer?, _ out: UnsafeMutablePointer<assetpatch_check_outcome>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_last_check: client is NULL") }
    guard let out else { return argumentError("assetpatch_last_check: out is NULL") }
    return status {
        guard let o = h.client.lastCheck else { throw AssetPatchError(.state, "no check or update has run on this client") }
        var v = assetpatch_check_outcome()
        v.status = o.status.rawValue
        v.reason = o.reason?.rawValue ?? 0
        v.manifest_version = o.manifestVersion
        v.accepted_version = o.acceptedVersion
        v.rollout_basis_points = o.rollout?.basisPoints ?? -1
        v.rollout_bucket = Int32(o.rollout?.bucket ?? -1)
        withUnsafeMutableBytes(of: &v.channel) { copyTruncated(o.channel ?? "", into: $0) }
        v.source = Int32(o.source ?? -1)
        try writeSized(v, to: out, what: "assetpatch_last_check", minimum: Int(ASSETPATCH_CHECK_OUTCOME_SIZE_0_4_0))
        return .ok
    }
}

@c @implementation
public func assetpatch_source_count(_ c: OpaquePointer?, _ count: UnsafeMutablePointer<Int>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_source_count: client is NULL") }
    guard let count else { return argumentError("assetpatch_source_count: count is NULL") }
    count.pointee = h.client.lastSources.count
    return Status.ok.rawValue
}

@c @implementation
public func assetpatch_source_at(_ c: OpaquePointer?, _ index: Int, _ out: UnsafeMutablePointer<assetpatch_source_info>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_source_at: client is NULL") }
    guard let out else { return argumentError("assetpatch_source_at: out is NULL") }
    return status {
        _ = try callerSize(out, what: "assetpatch_source_at", minimum: Int(ASSETPATCH_SOURCE_INFO_SIZE_0_5))
        let all = h.client.lastSources
        guard index >= 0, index < all.count else {
            throw AssetPatchError(.notFound, "assetpatch_source_at: index \(index) is past the \(all.count) sources")
        }
        let e = all[index]
        var info = assetpatch_source_info()
        info.demoted = e.demoted != nil ? 1 : 0
        info.served_head = e.servedHead ? 1 : 0
        info.requests = UInt64(e.requests)
        info.bytes = e.bytes
        withUnsafeMutableBytes(of: &info.url) { copyTruncated(e.head.shown, into: $0) }
        withUnsafeMutableBytes(of: &info.last) { copyTruncated(e.last, into: $0) }
        try writeSized(info, to: out, what: "assetpatch_source_at", minimum: Int(ASSETPATCH_SOURCE_INFO_SIZE_0_5))
        return .ok
    }
}
