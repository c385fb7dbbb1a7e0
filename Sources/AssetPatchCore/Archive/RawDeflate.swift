internal import CZlib

/// Raw deflate of small in-memory buffers (index pages): one call each way.
package enum RawDeflate {
    package static func compress(_ bytes: [UInt8], level: Int32) throws -> [UInt8] {
        let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        z.initialize(to: z_stream())
        defer { deflateEnd(z); z.deallocate() }
        guard czlib_deflate_init_raw(z, level) == Z_OK else { throw AssetPatchError(.internal, "deflateInit2 failed") }
        var out = [UInt8](repeating: 0, count: Int(deflateBound(z, UInt(bytes.count))) + 16)
        var input = bytes
        let produced: Int = try input.withUnsafeMutableBytes { inp in
            try out.withUnsafeMutableBytes { o in
                z.pointee.next_in = inp.baseAddress?.assumingMemoryBound(to: Bytef.self)
                z.pointee.avail_in = UInt32(inp.count)
                z.pointee.next_out = o.baseAddress!.assumingMemoryBound(to: Bytef.self)
                z.pointee.avail_out = UInt32(o.count)
                guard CZlib.deflate(z, Z_FINISH) == Z_STREAM_END else { throw AssetPatchError(.internal, "deflate did not finish") }
                return o.count - Int(z.pointee.avail_out)
            }
        }
        return Array(out.prefix(produced))
    }

    /// Inflates a whole raw deflate stream of at most `limit` bytes; nil when it does not decode,
    /// is longer, or does not end exactly at the input's end.
    package static func decompress(_ bytes: [UInt8], limit: Int) throws -> [UInt8]? {
        let inflater = try Inflater(.raw)
        var out: [UInt8] = []
        do {
            try bytes.withUnsafeBytes { try inflater.push($0, limit: UInt64(limit)) { out.append(contentsOf: $0) } }
        } catch is InflateFailure {
            return nil
        }
        return inflater.ended ? out : nil
    }
}
