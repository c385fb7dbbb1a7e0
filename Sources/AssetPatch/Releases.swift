import AssetPatchCore
import CAssetPatchABI

// Header section "Releases".

@_cdecl("assetpatch_current")
public func assetpatch_current(_ c: OpaquePointer?, _ version: UnsafeMutablePointer<Int64>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_current: client is NULL") }
    guard let version else { return argumentError("assetpatch_current: version is NULL") }
    version.pointee = h.client.currentVersion
    return Status.ok.rawValue
}

@_cdecl("assetpatch_mark_good")
public func assetpatch_mark_good(_ c: OpaquePointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_mark_good: client is NULL") }
    return status {
        try h.client.markGood()
        return .ok
    }
}

@_cdecl("assetpatch_rollback")
public func assetpatch_rollback(_ c: OpaquePointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_rollback: client is NULL") }
    return status {
        try h.client.rollback()
        return .ok
    }
}

@_cdecl("assetpatch_reset")
public func assetpatch_reset(_ c: OpaquePointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_reset: client is NULL") }
    return status {
        try h.client.reset()
        return .ok
    }
}

@_cdecl("assetpatch_lifecycle_get")
public func assetpatch_lifecycle_get(_ c: OpaquePointer?, _ out: UnsafeMutablePointer<assetpatch_lifecycle>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_lifecycle_get: client is NULL") }
    guard let out else { return argumentError("assetpatch_lifecycle_get: out is NULL") }
    return status {
        let s = try h.client.lifecycle()
        var l = assetpatch_lifecycle()
        l.active_version = s.active?.version ?? 0
        l.pending_version = s.pending?.version ?? 0
        l.active_marked_good = s.activeIsGood ? 1 : 0
        l.launches = UInt32(clamping: s.launches)
        l.max_failed_launches = UInt32(clamping: s.maxFailedLaunches)
        l.bad_versions = UInt32(clamping: s.bad.count)
        if let r = s.lastRollback {
            l.rolled_back_from = r.from
            l.rolled_back_to = r.to
            l.rolled_back_at = r.time
            withUnsafeMutableBytes(of: &l.rollback_reason) { buffer in
                // Whole characters only, and room for the NUL.
                var bytes: [UInt8] = []
                for scalar in r.reason.unicodeScalars {
                    let encoded = Array(String(scalar).utf8)
                    if bytes.count + encoded.count > buffer.count - 1 { break }
                    bytes += encoded
                }
                buffer.copyBytes(from: bytes)
                buffer[bytes.count] = 0
            }
        }
        out.pointee = l
        return .ok
    }
}

@_cdecl("assetpatch_disk_usage")
public func assetpatch_disk_usage(_ c: OpaquePointer?, _ releases: UnsafeMutablePointer<UInt64>?, _ downloads: UnsafeMutablePointer<UInt64>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_disk_usage: client is NULL") }
    let u = h.client.store.usage()
    releases?.pointee = u.releases
    downloads?.pointee = u.downloads
    return Status.ok.rawValue
}
