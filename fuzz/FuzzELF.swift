// libFuzzer target: the ELF reader that publish runs on any file declared as a plugin and a
// load runs on verified bytes. Invariants: never crash or read out of bounds (ASan); every
// symbol it reports is a non-empty name without NUL.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzELF(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let info = try? ELFInfo.parse(bytes) else { return 0 }
    for s in info.definedSymbols { precondition(!s.isEmpty && !s.utf8.contains(0), "bad symbol name") }
    return 0
}
