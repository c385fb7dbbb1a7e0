import AssetPatchCore
@_cdecl("assetpatch_version")
public func assetpatch_version() -> UnsafePointer<CChar> {
    UnsafeRawPointer(("0.1.0" as StaticString).utf8Start).assumingMemoryBound(to: CChar.self)
}
