import AssetPatchCore
import CAssetPatchABI

// Header section "Logging".

@c @implementation
public func assetpatch_set_log(_ c: OpaquePointer?, _ fn: assetpatch_log_fn?, _ userdata: UnsafeMutableRawPointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_set_log: client is NULL") }
    guard let fn else {
        h.client.setLogger(nil)
        return Status.ok.rawValue
    }
    // The host owns userdata; carry it as an integer so the closure is Sendable.
    let user = UInt(bitPattern: userdata)
    h.client.setLogger { level, message in
        fn(level.rawValue, message, UnsafeMutableRawPointer(bitPattern: user))
    }
    return Status.ok.rawValue
}
