import AssetPatchCore
import CAssetPatchABI
import Glibc

// Header section "Resolving resources".

@c @implementation
public func assetpatch_resolve(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ path: UnsafeMutablePointer<CChar>?,
                               _ pathCap: Int, _ pathLen: UnsafeMutablePointer<Int>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_resolve: client is NULL") }
    guard let name else { return argumentError("assetpatch_resolve: name is NULL") }
    if path == nil && pathCap != 0 { return argumentError("assetpatch_resolve: path is NULL but path_cap is \(pathCap)") }
    let nameBytes = UnsafeRawBufferPointer(start: name, count: strlen(name))
    var length = 0
    let rc = status {
        try h.client.resolve(nameBytes, into: path.map { UnsafeMutableRawPointer($0) }, capacity: pathCap, length: &length)
        return .ok
    }
    if rc == Status.ok.rawValue || rc == Status.range.rawValue { pathLen?.pointee = length }
    return rc
}

@c @implementation
public func assetpatch_resolve_variant(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ path: UnsafeMutablePointer<CChar>?,
                                       _ pathCap: Int, _ pathLen: UnsafeMutablePointer<Int>?, _ variant: UnsafeMutablePointer<CInt>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_resolve_variant: client is NULL") }
    guard let name else { return argumentError("assetpatch_resolve_variant: name is NULL") }
    if path == nil && pathCap != 0 { return argumentError("assetpatch_resolve_variant: path is NULL but path_cap is \(pathCap)") }
    let nameBytes = UnsafeRawBufferPointer(start: name, count: strlen(name))
    var length = 0, matched = 0
    let rc = status {
        try h.client.resolve(nameBytes, into: path.map { UnsafeMutableRawPointer($0) }, capacity: pathCap, length: &length, variant: &matched)
        return .ok
    }
    if rc == Status.ok.rawValue || rc == Status.range.rawValue {
        pathLen?.pointee = length
        variant?.pointee = CInt(matched)
    }
    return rc
}
