import AssetPatchCore
import Glibc

// What every shim shares: the handle behind an `assetpatch_client *`, the thread-local last
// error, and the one place where Swift errors become C status codes.

/// The object behind an `assetpatch_client *`: retained in open, released in close.
final class Handle {
    let client: Client
    init(_ client: Client) { self.client = client }
}

@inline(__always)
func handle(_ c: OpaquePointer?) -> Handle? {
    guard let c else { return nil }
    return Unmanaged<Handle>.fromOpaque(UnsafeRawPointer(c)).takeUnretainedValue()
}

// The thread-local last-error message (libgit2's git_error_last): a malloc'ed C string per
// thread, freed when replaced or when the thread exits.
let lastErrorKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key) { free($0) }
    return key
}()

func setLastError(_ message: String) {
    let copy = strdup(message)
    let old = pthread_getspecific(lastErrorKey)
    pthread_setspecific(lastErrorKey, copy)
    free(old)
}

/// A failure's status for C, its message kept as the thread's last error.
func report(_ error: AssetPatchError) -> CInt {
    setLastError(error.message)
    return error.status.rawValue
}

/// Runs `body`, turning a thrown error into its status (and the thread's last-error message).
@inline(__always)
func status(_ body: () throws -> Status) -> CInt {
    do {
        return try body().rawValue
    } catch let e as AssetPatchError {
        return report(e)
    } catch {
        return report(AssetPatchError(.internal, "internal error: \(error)"))
    }
}

/// A NULL or malformed argument, caught before the core is called.
func argumentError(_ what: String) -> CInt {
    report(AssetPatchError(.argument, what))
}

func cString(_ s: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// The `size` the caller set in a struct the library fills (its first field); throws
/// `.argument` when it is below the struct's first version (`minimum`): an uninitialised or
/// zeroed struct from a host built before the field existed.
func callerSize(_ out: UnsafeRawPointer, what: String, minimum: Int) throws -> Int {
    let size = Int(out.load(as: UInt32.self))
    guard size >= minimum else {
        throw AssetPatchError(.argument, "\(what): size is \(size); set it to sizeof the struct (its _INIT macro does), at least \(minimum)")
    }
    return size
}

/// Copies `value`, a struct whose first field is the caller's `uint32_t size`, into `out`,
/// writing no byte past the size the caller set and leaving that field as it was: a host built
/// against an older header, with a smaller struct, is never overrun, and one built against a
/// newer header keeps its own initial values in the fields this library does not know.
func writeSized<T>(_ value: T, to out: UnsafeMutablePointer<T>, what: String, minimum: Int) throws {
    let raw = UnsafeMutableRawPointer(out)
    let n = min(try callerSize(raw, what: what, minimum: minimum), MemoryLayout<T>.size)
    withUnsafeBytes(of: value) { bytes in
        // Everything after the size field, up to what the caller has room for.
        raw.advanced(by: 4).copyMemory(from: bytes.baseAddress! + 4, byteCount: n - 4)
    }
}
