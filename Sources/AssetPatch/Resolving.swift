import AssetPatchCore
import CAssetPatchABI
import Glibc

@_cdecl("assetpatch_resolve")
public func ap_resolve(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ path: UnsafeMutablePointer<CChar>?,
                       _ pathCap: Int, _ pathLen: UnsafeMutablePointer<Int>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_resolve: client is NULL") }
    guard let name else { return argumentError("assetpatch_resolve: name is NULL") }
    if path == nil && pathCap != 0 { return argumentError("assetpatch_resolve: path is NULL but path_cap is \(pathCap)") }
    let nameBytes = UnsafeRawBufferPointer(start: name, count: strlen(name))
    let (s, length) = h.client.resolve(nameBytes, into: path.map { UnsafeMutableRawPointer($0) }, capacity: pathCap)
    if s == .ok || s == .range { pathLen?.pointee = length }
    if s != .ok { setLastError(Client.resolveMessage(s, name: nameBytes, length: length, capacity: pathCap)) }
    return s.rawValue
}

@_cdecl("assetpatch_current")
public func ap_current(_ c: OpaquePointer?, _ version: UnsafeMutablePointer<Int64>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_current: client is NULL") }
    guard let version else { return argumentError("assetpatch_current: version is NULL") }
    version.pointee = h.client.currentVersion
    return Status.ok.rawValue
}

@_cdecl("assetpatch_set_log")
public func ap_set_log(_ c: OpaquePointer?, _ fn: assetpatch_log_fn?, _ userdata: UnsafeMutableRawPointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_set_log: client is NULL") }
    guard let fn else {
        h.client.setLogger(nil)
        return Status.ok.rawValue
    }
    // The host owns userdata; carry it as an integer so the closure is Sendable.
    let user = UInt(bitPattern: userdata)
    h.client.setLogger { level, message in
        fn(CInt(level), message, UnsafeMutableRawPointer(bitPattern: user))
    }
    return Status.ok.rawValue
}
