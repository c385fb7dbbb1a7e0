import Glibc

/// What the host calls most: a resource name to the path it has now.
extension Client {
    /// The active release's version; 0 when only the bundle is served.
    package var currentVersion: Int64 { view.read { $0.activeVersion } }

    /// Resolves `name` (raw UTF-8) into `out` (see `ResolveView.resolve`): the resolve fast
    /// path, non-generic so that a caller in another module (the C ABI) runs specialised code.
    package func resolve(_ name: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer?, capacity: Int,
                        length: inout Int) throws(AssetPatchError) {
        var variant = 0
        try resolve(name, into: out, capacity: capacity, length: &length, variant: &variant)
    }

    /// As `resolve(_:into:capacity:length:)`, and `variant` gets the index in `variants` of the
    /// variant that matched (the host learns the scale of what it loads).
    package func resolve(_ name: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer?, capacity: Int,
                        length: inout Int, variant: inout Int) throws(AssetPatchError) {
        let found = view.read { $0.resolve(name, into: out, capacity: capacity, length: &length, variant: &variant) }
        if found != .ok { throw view.read { $0.error(found, name: name, length: length, capacity: capacity, root: variant) } }
    }

    /// The absolute path `name` resolves to. Throws `.argument` for invalid names, `.notFound`.
    package func resolve(_ name: String) throws(AssetPatchError) -> String {
        try resolveVariant(name).path
    }

    /// The absolute path `name` resolves to and the index in `variants` of the variant that
    /// matched. Throws `.argument` for invalid names, `.notFound`.
    package func resolveVariant(_ name: String) throws(AssetPatchError) -> (path: String, variant: Int) {
        var name = name
        var length = 0, variant = 0, capacity = 1024
        while true {
            // On the stack: a path is copied once, into the String returned.
            let found = name.withUTF8 { n in
                withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 1) { out -> Result<String?, AssetPatchError> in
                    do throws(AssetPatchError) {
                        try resolve(UnsafeRawBufferPointer(n), into: out.baseAddress, capacity: out.count, length: &length, variant: &variant)
                        return .success(String(decoding: UnsafeRawBufferPointer(rebasing: out[..<length]), as: UTF8.self))
                    } catch {
                        return error.status == .range && capacity <= length ? .success(nil) : .failure(error)
                    }
                }
            }
            if let path = try found.get() { return (path, variant) }
            capacity = length + 1  // longer than the buffer; the view may change before the retry
        }
    }
}
