/// What a plugin's bytes say about themselves, read with every offset and size checked against
/// the buffer: `publish` refuses what is not a shared object for a known machine or lacks its
/// entry symbol, and a load refuses what is not for this machine before `dlopen` maps it (a
/// damaged file must be an error, never a SIGBUS or a crash inside the loader).
package struct ELFInfo: Sendable, Equatable {
    package var machine: UInt16
    package var is64Bit: Bool
    /// The symbols the object defines in its dynamic symbol table (what `dlsym` can find).
    package var definedSymbols: Set<String>

    /// e_machine values people ship shared objects for, with their names.
    package static let machines: [UInt16: String] = [3: "x86", 40: "ARM", 62: "x86-64", 183: "AArch64", 243: "RISC-V",
                                                     8: "MIPS", 21: "PowerPC64", 22: "S/390", 258: "LoongArch"]

    /// The machine this library runs on.
    package static var hostMachine: UInt16 {
        #if arch(x86_64)
        return 62
        #elseif arch(arm64)
        return 183
        #elseif arch(i386)
        return 3
        #elseif arch(arm)
        return 40
        #else
        return 0
        #endif
    }

    package var machineName: String { ELFInfo.name(of: machine) }

    package static func name(of machine: UInt16) -> String { machines[machine] ?? "machine \(machine)" }

    /// Parses a little-endian ELF shared object (ET_DYN) from `b`.
    package static func parse(_ b: [UInt8]) throws -> ELFInfo {
        func fail(_ what: String) -> AssetPatchError { AssetPatchError(.archive, what) }
        guard b.count >= 52, b[0] == 0x7F, b[1] == 0x45, b[2] == 0x4C, b[3] == 0x46 else { throw fail("not an ELF file") }
        guard b[5] == 1 else { throw fail("not a little-endian ELF file") }
        let is64: Bool
        switch b[4] {
        case 1: is64 = false
        case 2: is64 = true
        default: throw fail("unknown ELF class \(b[4])")
        }
        guard !is64 || b.count >= 64 else { throw fail("truncated ELF header") }
        let type = le16(b, 16), machine = le16(b, 18)
        guard type == 3 else { throw fail("not a shared object (ELF type \(type))") }
        func inBounds(_ offset: UInt64, _ size: UInt64) -> Bool { offset <= UInt64(b.count) && size <= UInt64(b.count) - offset }

        let shoff = is64 ? le64(b, 40) : UInt64(le32(b, 32))
        let shentsize = UInt64(le16(b, is64 ? 58 : 46)), shnum = UInt64(le16(b, is64 ? 60 : 48))
        let wantEntry: UInt64 = is64 ? 64 : 40
        guard shnum > 0, shentsize >= wantEntry, shnum <= 65535, inBounds(shoff, shentsize * shnum) else {
            throw fail("section headers lie outside the file (truncated?)")
        }
        struct Section { var type: UInt32; var offset: UInt64; var size: UInt64; var link: UInt32; var entsize: UInt64 }
        var sections: [Section] = []
        for i in 0..<Int(shnum) {
            let o = Int(shoff) + i * Int(shentsize)
            sections.append(is64
                ? Section(type: le32(b, o + 4), offset: le64(b, o + 24), size: le64(b, o + 32), link: le32(b, o + 40), entsize: le64(b, o + 56))
                : Section(type: le32(b, o + 4), offset: UInt64(le32(b, o + 16)), size: UInt64(le32(b, o + 20)), link: le32(b, o + 24),
                          entsize: UInt64(le32(b, o + 36))))
        }
        var symbols = Set<String>()
        for s in sections where s.type == 11 {  // SHT_DYNSYM
            let symSize: UInt64 = is64 ? 24 : 16
            guard s.entsize >= symSize, inBounds(s.offset, s.size), Int(s.link) < sections.count else {
                throw fail("dynamic symbol table lies outside the file")
            }
            let strtab = sections[Int(s.link)]
            guard inBounds(strtab.offset, strtab.size) else { throw fail("dynamic string table lies outside the file") }
            let count = s.size / s.entsize
            guard count <= 1 << 22 else { throw fail("too many dynamic symbols") }
            for k in 0..<count {
                let o = Int(s.offset + k * s.entsize)
                let nameOffset = UInt64(le32(b, o))
                let shndx = le16(b, o + (is64 ? 6 : 14))
                guard shndx != 0, nameOffset < strtab.size else { continue }  // undefined, or no name
                var end = Int(strtab.offset + nameOffset)
                let limit = Int(strtab.offset + strtab.size)
                let start = end
                while end < limit && b[end] != 0 { end += 1 }
                guard end < limit, end > start else { continue }
                symbols.insert(String(decoding: b[start..<end], as: UTF8.self))
            }
        }
        return ELFInfo(machine: machine, is64Bit: is64, definedSymbols: symbols)
    }
}
