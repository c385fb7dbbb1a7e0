// libFuzzer target: resource-name validation, variant insertion and the resolve index.
// Invariants: the fast byte validator agrees with a plain component-by-component reference;
// a valid name joined to a directory never escapes it; the index finds what it was built from.

private func reference(_ bytes: [UInt8]) -> Bool {
    guard !bytes.isEmpty, bytes.count <= ResourceName.maxLength, bytes.first != UInt8(ascii: "/"),
          !bytes.contains(0), !bytes.contains(UInt8(ascii: "\\")),
          let s = String(validating: bytes, as: UTF8.self) else { return false }
    if bytes.count >= 2, bytes[1] == UInt8(ascii: ":"), (bytes[0] >= 65 && bytes[0] <= 90) || (bytes[0] >= 97 && bytes[0] <= 122) {
        return false
    }
    // Components by byte: in Swift a "/" followed by a combining mark is one Character.
    for c in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
    where c.isEmpty || c.count > ResourceName.maxComponentLength || c.elementsEqual([46]) || c.elementsEqual([46, 46]) {
        return false
    }
    _ = s
    return true
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzName(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let fast = bytes.withUnsafeBytes { ResourceName.isValid($0) }
    precondition(fast == reference(bytes), "validator disagrees with the reference")
    guard fast, let name = String(validating: bytes, as: UTF8.self) else { return 0 }
    // Byte comparisons throughout: String's are by Character and canonical equivalence.
    precondition(FS.absolute("/root/dir/" + name).utf8.starts(with: "/root/dir/".utf8), "valid name escapes its directory")
    let variant = ResourceName.applyingVariant(name, "@2x")
    // A variant may only become invalid by outgrowing a length limit (then it can never match).
    precondition(ResourceName.isValid(variant) || variant.utf8.count > ResourceName.maxLength
                 || variant.utf8.split(separator: UInt8(ascii: "/")).contains { $0.count > ResourceName.maxComponentLength },
                 "variant of a valid name is invalid: \(variant)")
    let index = NameTable(root: "/r", names: [name, variant])
    precondition(index.lookup(name)?.utf8.elementsEqual(("/r/" + name).utf8) == true
        && index.lookup(variant)?.utf8.elementsEqual(("/r/" + variant).utf8) == true, "index lookup mismatch")
    return 0
}
