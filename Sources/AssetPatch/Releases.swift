import AssetPatchCore

// Header section "Releases".

@_cdecl("assetpatch_current")
public func assetpatch_current(_ c: OpaquePointer?, _ version: UnsafeMutablePointer<Int64>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_current: client is NULL") }
    guard let version else { return argumentError("assetpatch_current: version is NULL") }
    version.pointee = h.client.currentVersion
    return Status.ok.rawValue
}
