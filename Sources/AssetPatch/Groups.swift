import AssetPatchCore
import CAssetPatchABI

// Header section "Groups".

/// Fills the C struct for one group.
private func write(_ g: GroupStatus, to out: UnsafeMutablePointer<assetpatch_group_info>, what: String) throws {
    var info = assetpatch_group_info()
    info.state = g.state.rawValue
    info.delivery = Int32(g.delivery.rawValue)
    info.pinned = g.pinned ? 1 : 0
    info.files = UInt64(g.files)
    info.total_bytes = g.totalBytes
    info.local_bytes = g.localBytes
    info.archive_bytes = g.archiveBytes
    info.fetch_bytes = g.fetchBytes
    withUnsafeMutableBytes(of: &info.name) { copyTruncated(g.name, into: $0) }
    try writeSized(info, to: out, what: what, minimum: Int(ASSETPATCH_GROUP_INFO_SIZE_0_5))
}

@c @implementation
public func assetpatch_group_count(_ c: OpaquePointer?, _ count: UnsafeMutablePointer<Int>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_group_count: client is NULL") }
    guard let count else { return argumentError("assetpatch_group_count: count is NULL") }
    count.pointee = h.client.groupNames.count
    return Status.ok.rawValue
}

@c @implementation
public func assetpatch_group_at(_ c: OpaquePointer?, _ index: Int, _ out: UnsafeMutablePointer<assetpatch_group_info>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_group_at: client is NULL") }
    guard let out else { return argumentError("assetpatch_group_at: out is NULL") }
    return status {
        _ = try callerSize(out, what: "assetpatch_group_at", minimum: Int(ASSETPATCH_GROUP_INFO_SIZE_0_5))
        let names = h.client.groupNames
        guard index >= 0, index < names.count else {
            throw AssetPatchError(.notFound, "assetpatch_group_at: index \(index) is past the \(names.count) groups")
        }
        try write(try h.client.groupStatus(names[index]), to: out, what: "assetpatch_group_at")
        return .ok
    }
}

@c @implementation
public func assetpatch_group_status(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<assetpatch_group_info>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_group_status: client is NULL") }
    guard let name else { return argumentError("assetpatch_group_status: name is NULL") }
    guard let out else { return argumentError("assetpatch_group_status: out is NULL") }
    return status {
        _ = try callerSize(out, what: "assetpatch_group_status", minimum: Int(ASSETPATCH_GROUP_INFO_SIZE_0_5))
        try write(try h.client.groupStatus(String(cString: name)), to: out, what: "assetpatch_group_status")
        return .ok
    }
}

@c @implementation
public func assetpatch_group_fetch(_ c: OpaquePointer?, _ names: UnsafePointer<UnsafePointer<CChar>?>?, _ fn: assetpatch_progress_fn?,
                                   _ userdata: UnsafeMutableRawPointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_group_fetch: client is NULL") }
    guard let names else { return argumentError("assetpatch_group_fetch: names is NULL") }
    var list: [String] = []
    var i = 0
    while let n = names[i] {
        list.append(String(cString: n))
        i += 1
    }
    return status {
        try h.client.fetchGroups(list, progress: progressHandler(fn, userdata))
        return .ok
    }
}

@c @implementation
public func assetpatch_group_evict(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_group_evict: client is NULL") }
    guard let name else { return argumentError("assetpatch_group_evict: name is NULL") }
    return status {
        try h.client.evictGroup(String(cString: name))
        return .ok
    }
}

@c @implementation
public func assetpatch_group_pin(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ on: CInt) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_group_pin: client is NULL") }
    guard let name else { return argumentError("assetpatch_group_pin: name is NULL") }
    return status {
        try h.client.pinGroup(String(cString: name), on != 0)
        return .ok
    }
}
