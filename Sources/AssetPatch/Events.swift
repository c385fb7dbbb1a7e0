import AssetPatchCore
import CAssetPatchABI

// Header section "Outcome events".

@c @implementation
public func assetpatch_events_read(_ c: OpaquePointer?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: Int,
                                   _ len: UnsafeMutablePointer<Int>?, _ lastSeq: UnsafeMutablePointer<UInt64>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_events_read: client is NULL") }
    guard let buf else { return argumentError("assetpatch_events_read: buf is NULL") }
    return status {
        // Lines of the batch, then a NUL: whole lines only, and at least the first.
        let events = try h.client.readEvents(maxBytes: max(cap - 1, 0))
        var bytes: [UInt8] = []
        var last: UInt64 = 0
        for e in events {
            let line = Array(e.json.utf8) + [0x0A]
            if bytes.count + line.count + 1 > cap {
                if bytes.isEmpty {
                    len?.pointee = line.count
                    throw AssetPatchError(.range, "assetpatch_events_read: the oldest event needs \(line.count + 1) bytes, \(cap) given")
                }
                break
            }
            bytes += line
            last = e.seq
        }
        guard cap > bytes.count else {
            len?.pointee = 0
            throw AssetPatchError(.range, "assetpatch_events_read: cap is 0")
        }
        bytes.withUnsafeBytes { if $0.count > 0 { UnsafeMutableRawPointer(buf).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        buf[bytes.count] = 0
        len?.pointee = bytes.count
        lastSeq?.pointee = last
        return .ok
    }
}

@c @implementation
public func assetpatch_events_ack(_ c: OpaquePointer?, _ seq: UInt64) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_events_ack: client is NULL") }
    return status {
        try h.client.acknowledgeEvents(through: seq)
        return .ok
    }
}

@c @implementation
public func assetpatch_events_info_get(_ c: OpaquePointer?, _ out: UnsafeMutablePointer<assetpatch_events_info>?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_events_info_get: client is NULL") }
    guard let out else { return argumentError("assetpatch_events_info_get: out is NULL") }
    return status {
        let i = try h.client.eventsInfo()
        var v = assetpatch_events_info()
        v.pending = i.pending
        v.first_seq = i.firstSeq
        v.last_seq = i.lastSeq
        v.acked_seq = i.acked
        v.dropped = i.dropped
        v.bytes = i.bytes
        try writeSized(v, to: out, what: "assetpatch_events_info", minimum: Int(ASSETPATCH_EVENTS_INFO_SIZE_0_5))
        return .ok
    }
}

@c @implementation
public func assetpatch_set_event_callback(_ c: OpaquePointer?, _ fn: assetpatch_event_fn?, _ userdata: UnsafeMutableRawPointer?) -> CInt {
    guard let h = handle(c) else { return argumentError("assetpatch_set_event_callback: client is NULL") }
    guard let fn else {
        h.client.setEventCallback(nil)
        return Status.ok.rawValue
    }
    // The host owns userdata; carry it as an integer so the closure is Sendable.
    let user = UInt(bitPattern: userdata)
    h.client.setEventCallback { json in
        var bytes = Array(json.utf8CString)
        bytes.withUnsafeMutableBufferPointer { fn($0.baseAddress!, $0.count - 1, UnsafeMutableRawPointer(bitPattern: user)) }
    }
    return Status.ok.rawValue
}
