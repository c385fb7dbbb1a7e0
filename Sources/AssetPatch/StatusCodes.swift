import AssetPatchCore
import CAssetPatchABI
import Glibc

// Header section "Status codes".

@c @implementation
public func assetpatch_status_name(_ code: CInt) -> UnsafePointer<CChar> {
    guard let s = Status(rawValue: code) else { return cString("ASSETPATCH_UNKNOWN") }
    return cString(s.name)
}

/// The version as a C string that lives as long as the process (written once, then only read).
nonisolated(unsafe) private let versionText: UnsafePointer<CChar> = {
    let text = AssetPatchVersion.string
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: text.utf8.count + 1)
    for (i, b) in text.utf8.enumerated() { p[i] = CChar(bitPattern: b) }
    p[text.utf8.count] = 0
    return UnsafePointer(p)
}()

@c @implementation
public func assetpatch_version() -> UnsafePointer<CChar> {
    versionText
}

@c @implementation
public func assetpatch_last_error() -> UnsafePointer<CChar> {
    guard let p = pthread_getspecific(lastErrorKey) else { return cString("") }
    return UnsafePointer(p.assumingMemoryBound(to: CChar.self))
}
