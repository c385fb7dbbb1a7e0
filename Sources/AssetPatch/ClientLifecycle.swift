import AssetPatchCore
import CAssetPatchABI

// Header section "Client lifecycle".

@c @implementation
public func assetpatch_client_open(_ dataDir: UnsafePointer<CChar>?, _ bundleDir: UnsafePointer<CChar>?,
                                   _ out: UnsafeMutablePointer<OpaquePointer?>?) -> CInt {
    guard let out else { return argumentError("assetpatch_client_open: out is NULL") }
    out.pointee = nil
    guard let dataDir else { return argumentError("assetpatch_client_open: data_dir is NULL") }
    let dir = String(cString: dataDir)
    guard !dir.isEmpty else { return argumentError("assetpatch_client_open: data_dir is empty") }
    let bundle = bundleDir.map { String(cString: $0) }
    return status {
        let client = try Client(dataDir: dir, bundleDir: bundle)
        out.pointee = OpaquePointer(Unmanaged.passRetained(Handle(client)).toOpaque())
        return .ok
    }
}

@c @implementation
public func assetpatch_client_set(_ c: OpaquePointer?, _ option: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_client_set: client is NULL") }
    guard let option else { return argumentError("assetpatch_client_set: option is NULL") }
    guard let value else { return argumentError("assetpatch_client_set: value is NULL") }
    return status {
        try h.client.set(String(cString: option), String(cString: value))
        return .ok
    }
}

@c @implementation
public func assetpatch_client_close(_ c: OpaquePointer?) {
    guard let c else { return }
    let h = Unmanaged<Handle>.fromOpaque(UnsafeRawPointer(c))
    h.takeUnretainedValue().client.close()
    h.release()
}
