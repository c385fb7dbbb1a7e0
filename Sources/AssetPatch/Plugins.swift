import AssetPatchCore
import CAssetPatchABI

// Header section "Plugins".

@c @implementation
public func assetpatch_plugin_load(_ c: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ symbol: UnsafePointer<CChar>?,
                                   _ address: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_plugin_load: client is NULL") }
    guard let name else { return argumentError("assetpatch_plugin_load: name is NULL") }
    guard let address else { return argumentError("assetpatch_plugin_load: address is NULL") }
    return status {
        address.pointee = try h.client.loadPlugin(String(cString: name), symbol: symbol.map { String(cString: $0) })
        return .ok
    }
}

@c @implementation
public func assetpatch_plugin_list(_ c: OpaquePointer?, _ out: UnsafeMutablePointer<assetpatch_plugin_info>?, _ cap: Int,
                                   _ count: UnsafeMutablePointer<Int>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_plugin_list: client is NULL") }
    return status {
        // The caller's element size is the stride: a host built against another header version
        // lays its array out with its own sizeof.
        let stride = try out.map { try callerSize($0, what: "assetpatch_plugin_list", minimum: Int(ASSETPATCH_PLUGIN_INFO_SIZE_0_4_0)) } ?? 0
        let list = try h.client.listPlugins()
        count?.pointee = list.count
        if let out {
            let base = UnsafeMutableRawPointer(out)
            for (i, p) in list.prefix(max(0, cap)).enumerated() {
                var info = assetpatch_plugin_info()
                withUnsafeMutableBytes(of: &info.name) { copyTruncated(p.name, into: $0) }
                withUnsafeMutableBytes(of: &info.version) { copyTruncated(p.version ?? "", into: $0) }
                withUnsafeMutableBytes(of: &info.entry) { copyTruncated(p.entry, into: $0) }
                withUnsafeMutableBytes(of: &info.abi) { copyTruncated(p.abi ?? "", into: $0) }
                let element = base.advanced(by: i * stride)
                element.storeBytes(of: UInt32(stride), as: UInt32.self)
                try writeSized(info, to: element.assumingMemoryBound(to: assetpatch_plugin_info.self), what: "assetpatch_plugin_list", minimum: Int(ASSETPATCH_PLUGIN_INFO_SIZE_0_4_0))
            }
        }
        return .ok
    }
}
