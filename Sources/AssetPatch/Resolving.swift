import AssetPatchCore
import CAssetPatchABI
import Glibc

// Header section "Resolving resources".

@c @implementation
public func assetpatch_resolve(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ path: UnsafeMutablePointer<CChar>?,
                               _ pathCap: Int, _ pathLen: UnsafeMutablePointer<Int>?) -> CInt {
    resolve("assetpatch_resolve", c, name, path, pathCap, pathLen, nil)
}

@c @implementation
public func assetpatch_resolve_variant(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ path: UnsafeMutablePointer<CChar>?,
                                       _ pathCap: Int, _ pathLen: UnsafeMutablePointer<Int>?, _ variant: UnsafeMutablePointer<CInt>?) -> CInt {
    resolve("assetpatch_resolve_variant", c, name, path, pathCap, pathLen, variant)
}

/// Both resolve calls: the hot path of every host. The handle is borrowed (no retain or
/// release: the host keeps it open across the call, as the header requires) and an error is
/// built only when the lookup fails.
@inline(__always)
private func resolve(_ function: StaticString, _ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ path: UnsafeMutablePointer<CChar>?,
                     _ pathCap: Int, _ pathLen: UnsafeMutablePointer<Int>?, _ variant: UnsafeMutablePointer<CInt>?) -> CInt {
    guard let c else { return argumentError("\(function): client is NULL") }
    guard let name else { return argumentError("\(function): name is NULL") }
    if path == nil && pathCap != 0 { return argumentError("\(function): path is NULL but path_cap is \(pathCap)") }
    let nameBytes = UnsafeRawBufferPointer(start: name, count: strlen(name))
    var length = 0, matched = 0
    let rc: CInt = Unmanaged<Handle>.fromOpaque(UnsafeRawPointer(c))._withUnsafeGuaranteedRef { h in
        do throws(AssetPatchError) {
            try h.client.resolve(nameBytes, into: path.map { UnsafeMutableRawPointer($0) }, capacity: pathCap,
                                 length: &length, variant: &matched)
            return Status.ok.rawValue
        } catch {
            return report(error)
        }
    }
    if rc == Status.ok.rawValue || rc == Status.range.rawValue {
        pathLen?.pointee = length
        variant?.pointee = CInt(matched)
    }
    return rc
}
