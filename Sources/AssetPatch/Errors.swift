import AssetPatchCore
import CAssetPatchABI
import Glibc

// The thread-local last-error message (libgit2's git_error_last): a malloc'ed C string per
// thread, freed when replaced or when the thread exits.
private let lastErrorKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key) { free($0) }
    return key
}()

private let emptyMessage: StaticString = ""

func setLastError(_ message: String) {
    let copy = strdup(message)
    let old = pthread_getspecific(lastErrorKey)
    pthread_setspecific(lastErrorKey, copy)
    free(old)
}

/// Runs `body`, turning a thrown error into its status (and the thread's last-error message).
/// This is the one place where Swift errors become C status codes.
@inline(__always)
func status(_ body: () throws -> Status) -> CInt {
    do {
        return try body().rawValue
    } catch let e as AssetPatchError {
        setLastError(e.message)
        return e.status.rawValue
    } catch {
        setLastError("internal error: \(error)")
        return Status.internal.rawValue
    }
}

func argumentError(_ what: String) -> CInt {
    setLastError(what)
    return Status.argument.rawValue
}

func cString(_ s: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self)
}

@_cdecl("assetpatch_status_name")
public func ap_status_name(_ code: CInt) -> UnsafePointer<CChar> {
    guard let s = Status(rawValue: code) else { return cString("ASSETPATCH_UNKNOWN") }
    return cString(s.name)
}

@_cdecl("assetpatch_version")
public func ap_version() -> UnsafePointer<CChar> {
    cString("0.1.0")
}

@_cdecl("assetpatch_last_error")
public func ap_last_error() -> UnsafePointer<CChar> {
    guard let p = pthread_getspecific(lastErrorKey) else { return cString(emptyMessage) }
    return UnsafePointer(p.assumingMemoryBound(to: CChar.self))
}
