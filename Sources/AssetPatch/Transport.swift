import AssetPatchCore
import CAssetPatchABI
import Glibc

// Header section "A transport of the host's own".

@c @implementation
public func assetpatch_set_transport(_ c: OpaquePointer?, _ transport: UnsafePointer<assetpatch_transport>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_set_transport: client is NULL") }
    guard let transport else {
        h.client.setTransport(nil)
        return Status.ok.rawValue
    }
    return status {
        _ = try callerSize(transport, what: "assetpatch_set_transport", minimum: Int(ASSETPATCH_TRANSPORT_SIZE_0_5))
        guard let perform = transport.pointee.perform else {
            throw AssetPatchError(.argument, "assetpatch_set_transport: perform is NULL")
        }
        // The host owns userdata; carried as an integer so the closure is Sendable.
        let user = UInt(bitPattern: transport.pointee.userdata)
        h.client.setTransport(HostTransport { method, url, lines, response in
            var pointers: [UnsafeMutablePointer<CChar>?] = lines.map { strdup($0) }
            pointers.append(nil)
            defer { for p in pointers { free(p) } }
            let r = OpaquePointer(Unmanaged.passUnretained(response).toOpaque())
            return pointers.withUnsafeBufferPointer { array in
                array.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: array.count) { headers in
                    perform(UnsafeMutableRawPointer(bitPattern: user), method, url, headers, r)
                }
            }
        })
        return .ok
    }
}

private func response(_ r: OpaquePointer?) -> HostResponse? {
    r.map { Unmanaged<HostResponse>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

@c @implementation
public func assetpatch_transport_head(_ r: OpaquePointer?, _ status: CInt, _ headers: UnsafePointer<UnsafePointer<CChar>?>?,
                                      _ finalURL: UnsafePointer<CChar>?) -> CInt {
    guard let response = response(r) else { return 1 }
    var lines: [String] = []
    if let headers {
        var i = 0
        while let line = headers[i], lines.count < 200 {
            lines.append(String(cString: line))
            i += 1
        }
    }
    return response.head(status: Int(status), lines: lines, finalURL: finalURL.map { String(cString: $0) }) ? 0 : 1
}

@c @implementation
public func assetpatch_transport_body(_ r: OpaquePointer?, _ data: UnsafeRawPointer?, _ length: Int) -> CInt {
    guard let response = response(r) else { return 1 }
    guard length > 0 else { return 0 }
    guard let data else {
        response.fail("the host transport handed over \(length) bytes at NULL")
        return 1
    }
    return response.body(UnsafeRawBufferPointer(start: data, count: length)) ? 0 : 1
}
