import Glibc
import Synchronization

/// What resolving reads: the active release's index, the bundle's, and the variant order.
/// Immutable; replaced as a whole (one reference swap under a short lock) when a release
/// activates or the variants change, so a lookup costs one retain/release, not one per field.
final class ResolveView: @unchecked Sendable {  // immutable after init; `suffixes` is never written again
    let release: ResolveIndex?
    let bundle: ResolveIndex?
    let variants: [[UInt8]]
    let maxSuffix: Int
    let activeVersion: Int64
    /// The variant suffixes back to back in one buffer, and their (offset, length): the lookup
    /// loop walks raw memory instead of retaining an array of arrays.
    let suffixes: UnsafeMutableRawBufferPointer
    let spans: UnsafeMutableBufferPointer<(offset: Int, length: Int)>

    init(release: ResolveIndex?, bundle: ResolveIndex?, variants: [[UInt8]], activeVersion: Int64) {
        self.release = release
        self.bundle = bundle
        self.variants = variants
        self.maxSuffix = variants.reduce(0) { max($0, $1.count) }
        self.activeVersion = activeVersion
        suffixes = .allocate(byteCount: max(1, variants.reduce(0) { $0 + $1.count }), alignment: 1)
        spans = .allocate(capacity: max(1, variants.count))
        var offset = 0
        for (i, v) in variants.enumerated() {
            v.withUnsafeBytes { if $0.count > 0 { (suffixes.baseAddress! + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
            spans[i] = (offset, v.count)
            offset += v.count
        }
    }

    deinit {
        suffixes.deallocate()
        spans.deallocate()
    }

    func with(release: ResolveIndex?? = nil, variants: [[UInt8]]? = nil, activeVersion: Int64? = nil) -> ResolveView {
        ResolveView(release: release ?? self.release, bundle: bundle, variants: variants ?? self.variants,
                    activeVersion: activeVersion ?? self.activeVersion)
    }

    /// The path for the first candidate found, release before bundle.
    @inline(__always)
    func find(_ candidate: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        if let r = release, let p = r.lookup(candidate) { return p }
        if let b = bundle, let p = b.lookup(candidate) { return p }
        return nil
    }
}

/// The result of a check: the release an update would install and what it would transfer.
public struct CheckResult: Sendable {
    public var version: Int64
    public var downloadBytes: UInt64
}

/// One client of a data directory: options, the served release, updates (blocking or on a
/// background thread), and resolving. Every method is thread-safe.
public final class Client: @unchecked Sendable {  // mutable state is behind Mutex/Atomic/Condition
    public let store: Store
    public let bundleDir: String?
    private let config: Mutex<ClientConfig>
    private let view: Mutex<ResolveView>
    private let cancelToken = CancelToken()
    private let updating = Atomic<Bool>(false)
    private let logger = Mutex<(@Sendable (Int, String) -> Void)?>(nil)

    private enum Background { case idle, running, finished(Status, String) }
    private let background = Condition()
    private var backgroundState = Background.idle   // guarded by `background`
    private var backgroundThread: pthread_t?          // guarded by `background`

    /// Opens (creating if needed) `dataDir`, recovers from an interrupted update, activates a
    /// release installed with apply=next_open, and indexes the active release and the bundle.
    public init(dataDir: String, bundleDir: String?) throws {
        store = try Store(root: dataDir)
        var bundle: String?
        if let bundleDir {
            let abs = FS.absolute(bundleDir)
            guard FS.isDirectory(abs) else { throw AssetPatchError(.io, "bundle_dir \(abs): not a directory") }
            bundle = abs
        }
        self.bundleDir = bundle
        config = Mutex(ClientConfig())
        view = Mutex(ResolveView(release: nil, bundle: nil, variants: [[]], activeVersion: 0))

        // Recovery and next_open activation write the data directory: only under the lock.
        // If another process is updating, it owns that work; serve what the state names.
        // The state is read once, after the lock is settled; the lock is released right after.
        var state: StoreState
        if let lock = try store.tryLock() {
            state = try store.loadState()
            if let pending = state.pending {
                if let old = state.active { state.kept.insert(old, at: 0) }
                state.active = pending
                state.activeLegacyDigest = state.pendingLegacyDigest
                state.pending = nil
                state.pendingLegacyDigest = nil
                try store.save(state)
            }
            try store.recover(state)
            _ = lock
        } else {
            state = try store.loadState()
        }
        let bundleIndex = try bundle.map { ResolveIndex(root: $0, names: try FS.walkFiles($0).filter(ResourceName.isValid)) }
        let releaseIndex = try loadIndex(state.active)
        view.withLock {
            $0 = ResolveView(release: releaseIndex, bundle: bundleIndex, variants: [[]],
                             activeVersion: releaseIndex == nil ? 0 : state.active?.version ?? 0)
        }
    }

    private func loadIndex(_ ref: ReleaseRef?) throws -> ResolveIndex? {
        guard let ref else { return nil }
        // Fast path: the NUL-separated names file (no JSON, no hashes); release.json otherwise.
        if let bytes = try? FS.readFile(store.releaseDir(ref.id) + "/names", limit: 512 << 20),
           let index = ResolveIndex(root: store.filesDir(ref.id), nulSeparated: bytes) {
            return index
        }
        let info = try store.loadRelease(ref.id)
        return ResolveIndex(root: store.filesDir(ref.id), names: info.files.map(\.path))
    }

    // MARK: Options and logging

    public func set(_ option: String, _ value: String) throws {
        try config.withLock { try $0.set(option, value) }
        if option == "variants" {
            let variants = config.withLock { $0.variants.map { Array($0.utf8) } }
            view.withLock { $0 = $0.with(variants: variants) }
        }
    }

    public var configuration: ClientConfig { config.withLock { $0 } }

    public func setLogger(_ fn: (@Sendable (Int, String) -> Void)?) {
        logger.withLock { $0 = fn }
    }

    func log(_ level: Int, _ message: String) {
        if let fn = logger.withLock({ $0 }) { fn(level, message) }
    }

    // MARK: Updating

    /// Fetches and judges the manifest only. nil: no update.
    public func check() throws -> CheckResult? {
        let updater = makeUpdater(progress: nil)
        var state = try store.loadState()
        let before = state
        guard let candidate = try updater.evaluate(&state) else {
            persistAcceptance(before, state)
            return nil
        }
        persistAcceptance(before, state)
        return CheckResult(version: candidate.version, downloadBytes: updater.remainingBytes(candidate))
    }

    /// The package pin and downgrade mark move when a manifest is accepted, also by a check.
    /// A check does not wait for a running update; that update persists them itself.
    private func persistAcceptance(_ before: StoreState, _ after: StoreState) {
        guard after.package != before.package || after.highestVersion != before.highestVersion else { return }
        guard let lock = try? store.tryLock() else { return }
        defer { _ = lock }
        if var fresh = try? store.loadState() {
            fresh.package = after.package
            fresh.highestVersion = max(fresh.highestVersion, after.highestVersion)
            try? store.save(fresh)
        }
    }

    private func makeUpdater(progress: ProgressHandler?) -> Updater {
        Updater(store: store, config: configuration, cancel: cancelToken, progress: progress) { [weak self] level, message in
            self?.log(level, message)
        }
    }

    /// Check + download + install + activate. true: a release was installed; false: no update.
    public func update(progress: ProgressHandler?) throws -> Bool {
        guard updating.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            throw AssetPatchError(.busy, "an update is already running on this client")
        }
        defer { updating.store(false, ordering: .releasing) }
        cancelToken.reset()
        return try runUpdate(progress: progress)
    }

    private func runUpdate(progress: ProgressHandler?) throws -> Bool {
        guard configuration.manifestURL != nil else { throw AssetPatchError(.state, "no manifest_url set") }
        guard let lock = try store.tryLock() else {
            throw AssetPatchError(.busy, "another update is running on \(store.root)")
        }
        defer { _ = lock }
        let updater = makeUpdater(progress: progress)
        var state = try store.loadState()
        let before = state
        updater.progress.report(Progress(phase: .check))
        guard let candidate = try updater.evaluate(&state) else {
            if state != before { try store.save(state) }
            updater.progress.report(Progress(phase: .check), final: true)
            updater.progress.report(Progress(phase: .done), final: true)
            log(1, "no update: version \(state.active?.version ?? 0) is current")
            return false
        }
        if state != before { try store.save(state) }
        updater.progress.report(Progress(phase: .check), final: true)
        log(1, "updating to version \(candidate.version) from \(URLs.redacted(candidate.archiveURL))")

        let archive = try updater.download(candidate)
        try cancelToken.check()
        let stage = store.stagingDir + "/" + candidate.releaseID
        let info: ReleaseInfo
        do {
            info = try updater.install(candidate, archive: archive)
        } catch {
            try? FS.removeTree(stage)
            if let e = error as? AssetPatchError, e.status == .integrity || e.status == .archive {
                // The archive matched the manifest's digest yet is unusable: don't resume it.
                updater.discardPartial(candidate)
            }
            throw error
        }
        try cancelToken.check()
        do {
            try updater.activate(candidate, state: &state)
        } catch {
            try? FS.removeTree(stage)
            throw error
        }
        if configuration.apply == .immediate {
            let index = ResolveIndex(root: store.filesDir(candidate.releaseID), names: info.files.map(\.path))
            view.withLock { $0 = $0.with(release: .some(index), activeVersion: candidate.version) }
        }
        updater.progress.report(Progress(phase: .done), final: true)
        log(1, "installed version \(candidate.version)")
        return true
    }

    /// Runs `update` on a background thread.
    public func startUpdate(progress: ProgressHandler?) throws {
        try background.locked {
            if case .running = backgroundState { throw AssetPatchError(.busy, "an update is already running on this client") }
            if let old = backgroundThread { pthread_join(old, nil); backgroundThread = nil }
            guard updating.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
                throw AssetPatchError(.busy, "an update is already running on this client")
            }
            cancelToken.reset()
            backgroundState = .running
            do {
                backgroundThread = try startThread { [self] in
                    var status = Status.ok
                    var message = ""
                    do {
                        status = try runUpdate(progress: progress) ? .ok : .noUpdate
                    } catch let e as AssetPatchError {
                        status = e.status
                        message = e.message
                    } catch {
                        status = .internal
                        message = "\(error)"
                    }
                    updating.store(false, ordering: .releasing)
                    background.locked {
                        backgroundState = .finished(status, message)
                        background.broadcast()
                    }
                }
            } catch {
                backgroundState = .idle
                updating.store(false, ordering: .releasing)
                throw error
            }
        }
    }

    /// Waits for the background update. Returns its status and message once; `.busy` at the
    /// timeout; throws `.state` when none was started or its result was already handed out.
    public func waitUpdate(timeoutMs: Int) throws -> (Status, String)? {
        let deadline: UInt64? = timeoutMs < 0 ? nil : monotonicMillis() + UInt64(timeoutMs)
        return try background.locked {
            while true {
                switch backgroundState {
                case .idle:
                    throw AssetPatchError(.state, "no update was started")
                case let .finished(status, message):
                    backgroundState = .idle
                    if let t = backgroundThread { pthread_join(t, nil); backgroundThread = nil }
                    return (status, message)
                case .running:
                    if let deadline, monotonicMillis() >= deadline { return nil }
                    background.wait(until: deadline)
                }
            }
        }
    }

    /// Asks a running update to stop soon.
    public func cancel() { cancelToken.cancel() }

    /// Cancels a running update and waits for it to stop.
    public func close() {
        cancelToken.cancel()
        background.locked {
            while case .running = backgroundState { background.wait(until: nil) }
            if let t = backgroundThread { pthread_join(t, nil); backgroundThread = nil }
        }
    }

    // MARK: Resolving

    /// The active release's version; 0 when only the bundle is served.
    public var currentVersion: Int64 { view.withLock { $0.activeVersion } }

    /// Resolves `name` (raw UTF-8) and passes the absolute path's bytes to `body`; the bytes are
    /// valid only inside `body`. Throws `.argument` for invalid names, `.notFound`.
    /// The resolve fast path, non-generic and non-throwing so that a caller in another module
    /// (the C ABI) runs specialised code: no allocation, no system call, no metadata lookup.
    /// On `.ok` the NUL-terminated path is in `out` when it fits (`.range` otherwise); `length`
    /// is the path's length without the NUL for `.ok` and `.range`.
    public func resolve(_ name: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer?, capacity: Int) -> (status: Status, length: Int) {
        guard ResourceName.isValid(name) else { return (.argument, 0) }
        let v = view.withLock { $0 }
        let need = name.count + v.maxSuffix
        if need <= 512 {
            // A fixed 512-byte buffer on the stack for the candidates: the common case.
            var scratch: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                          UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                          UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                          UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)
                = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            return withUnsafeMutableBytes(of: &scratch) { Client.lookup(v, name, $0.baseAddress!, out, capacity) }
        }
        return withUnsafeTemporaryAllocation(byteCount: need, alignment: 1) { Client.lookup(v, name, $0.baseAddress!, out, capacity) }
    }

    @inline(__always)
    private static func lookup(_ v: ResolveView, _ name: UnsafeRawBufferPointer, _ base: UnsafeMutableRawPointer,
                               _ out: UnsafeMutableRawPointer?, _ capacity: Int) -> (status: Status, length: Int) {
        var at = -1
        for i in 0..<v.variants.count {
            let (offset, length) = v.spans[i]
            let candidate: UnsafeRawBufferPointer
            if length == 0 {
                candidate = name
            } else {
                if at < 0 {
                    at = ResourceName.suffixInsertionPoint(name)
                    base.copyMemory(from: name.baseAddress!, byteCount: at)
                }
                (base + at).copyMemory(from: v.suffixes.baseAddress! + offset, byteCount: length)
                (base + at + length).copyMemory(from: name.baseAddress! + at, byteCount: name.count - at)
                candidate = UnsafeRawBufferPointer(start: base, count: name.count + length)
            }
            if let p = v.find(candidate) {
                guard let out, capacity > p.count else { return (.range, p.count) }
                out.copyMemory(from: p.baseAddress!, byteCount: p.count)
                out.storeBytes(of: 0, toByteOffset: p.count, as: UInt8.self)
                return (.ok, p.count)
            }
        }
        return (.notFound, 0)
    }

    /// The message for a failed `resolve(_:into:capacity:)`.
    public static func resolveMessage(_ status: Status, name: UnsafeRawBufferPointer, length: Int, capacity: Int) -> String {
        let shown = String(decoding: name, as: UTF8.self)
        switch status {
        case .argument: return "invalid resource name \"\(shown)\""
        case .range: return "path of \(length) bytes for \"\(shown)\" does not fit in \(capacity)"
        default: return "no resource \"\(shown)\" in the active release or the bundle"
        }
    }

    public func resolve(_ name: String) throws -> String {
        var n = name
        return try n.withUTF8 { b -> String in
            let bytes = UnsafeRawBufferPointer(b)
            var (status, length) = resolve(bytes, into: nil, capacity: 0)
            if status == .range {
                var out = [UInt8](repeating: 0, count: length + 1)
                (status, length) = out.withUnsafeMutableBytes { resolve(bytes, into: $0.baseAddress, capacity: $0.count) }
                if status == .ok { return String(decoding: out[..<length], as: UTF8.self) }
            }
            throw AssetPatchError(status, Client.resolveMessage(status, name: bytes, length: length, capacity: 0))
        }
    }
}
