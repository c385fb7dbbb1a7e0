internal import AssetPatchCore
import Synchronization

/// Hot-updatable resources: fetch newer releases from a static web host, verify them, switch
/// to them atomically, and resolve resource names to files.
///
/// A client serves the active release's files first, then the bundle's (the read-only
/// resources shipped with the app). ``update(progress:)`` fetches the release manifest,
/// verifies its signature and judges it (no downgrade, not expired, fits this app), transfers
/// what changed — only the changed files when ranges pay off, else the whole archive, resuming
/// across failures and restarts — verifies every byte, installs the release next to the old one
/// and switches to it in one atomic step.
///
/// ```swift
/// let client = try AssetPatchClient(dataDirectory: "/var/lib/mygame/assets", bundleDirectory: "/usr/share/mygame",
///                                   options: .init(manifestURL: "https://cdn.example/mygame/manifest.json",
///                                                  publicKeys: ["base64 Ed25519 key"], variants: ["@2x", ""]))
/// let installed = try await client.update { p in print(p.phase, p.bytesDone, p.bytesTotal) }
/// let path = try client.resolve("sprites/hero.png")
/// ```
///
/// This API and the C API (`assetpatch.h`) are two thin layers over the same core: the same
/// options parser, the same update, the same resolver. Everything is thread-safe; ``resolve(_:)``
/// never waits for a running update. Several clients, in one process or several, may share a
/// data directory; one update runs at a time (``AssetPatchError/Status/busy``).
public final class AssetPatchClient: Sendable {
    private let core: Client
    private let closed = Atomic<Bool>(false)

    /// Opens a client on `dataDirectory`, a writable directory the library owns (created if
    /// missing), serving `bundleDirectory` (the app's read-only resources; nil: none) where the
    /// active release has no file, and applies `options`.
    ///
    /// Opening finishes or discards what an interrupted update left behind and activates a
    /// release installed with ``Options/ApplyMode/nextOpen``. It also counts a launch of an
    /// active release the app has not confirmed (see ``markGood()``).
    /// - Throws: ``AssetPatchError`` with `.io` (the data directory can't be created or written,
    ///   the bundle is not a directory, a corrupt state) or `.argument` (a bad option).
    public init(dataDirectory: String, bundleDirectory: String? = nil, options: Options = Options()) throws(AssetPatchError) {
        core = try mapped { try Client(dataDir: dataDirectory, bundleDir: bundleDirectory) }
        do {
            try apply(options)
        } catch {
            core.close()
            throw error
        }
    }

    deinit { close() }

    /// Cancels a running update, waits for it to stop and releases the client. Later calls
    /// fail with ``AssetPatchError/Status/state``; closing twice is harmless. Paths already
    /// resolved stay valid.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        core.close()
    }

    func open() throws(AssetPatchError) -> Client {
        if closed.load(ordering: .acquiring) { throw AssetPatchError(.state, "the client is closed") }
        return core
    }

    // MARK: Options

    /// Applies `options` over the ones in force (nil fields are left as they are). An update
    /// already running keeps the options it started with.
    /// - Throws: ``AssetPatchError`` `.argument` for a bad value; the options before it stay applied.
    public func apply(_ options: Options) throws(AssetPatchError) {
        let c = try open()
        for (name, value) in options.settings {
            try mapped { try c.set(name, value) }
        }
    }

    /// Sets one option by its C API name (`assetpatch_client_set`), for options this version's
    /// ``Options`` does not name yet.
    public func set(_ option: String, _ value: String) throws(AssetPatchError) {
        let c = try open()
        try mapped { try c.set(option, value) }
    }

    /// Sends the library's log messages to `handler` (any thread; keep it quick), or stops
    /// with nil.
    public func setLogHandler(_ handler: (@Sendable (LogLevel, String) -> Void)?) {
        guard let c = try? open() else { return }
        guard let handler else { return c.setLogger(nil) }
        c.setLogger { level, message in handler(LogLevel(rawValue: Int(level.rawValue)) ?? .info, message) }
    }

    // MARK: Updating

    /// Fetches and judges the manifest without transferring any file.
    /// - Returns: the newer release and what an update would transfer now, or nil when the
    ///   active release is the newest.
    /// - Throws: ``AssetPatchError``: `.state` (no manifest URL), `.network`, `.http`,
    ///   `.manifest`, `.signature`, `.expired`, `.incompatible`.
    public func check() async throws(AssetPatchError) -> AvailableUpdate? {
        let c = try open()
        let found = try await offPool { () throws(AssetPatchError) in try mapped { try c.check() } }.get()
        return found.map { AvailableUpdate(version: $0.version, downloadBytes: $0.downloadBytes) }
    }

    /// Updates to the newest release the manifest offers: check, transfer, verify, install,
    /// switch. With ``Options/ApplyMode/immediate`` (the default) ``resolve(_:)`` serves the new
    /// release when this returns true.
    ///
    /// The update runs on a thread of its own. Cancelling the calling task cancels it (as
    /// ``cancel()`` does): it stops within about 50 ms and throws `.cancelled`; what it
    /// downloaded is kept for the next update, and the active release is untouched.
    /// - Parameter progress: called on the update's thread, at most every 50 ms and at every
    ///   phase change; phases only move forward.
    /// - Returns: true when a release was installed, false when the active one is the newest.
    /// - Throws: ``AssetPatchError``; a failed update never changes what is served.
    @discardableResult
    public func update(progress: (@Sendable (UpdateProgress) -> Void)? = nil) async throws(AssetPatchError) -> Bool {
        let c = try open()
        return try await cancellable(progress, cancel: { c.cancel() }) { handler in try c.update(progress: handler) }
    }

    /// Runs `call` (an update, a group fetch) on a thread of its own with a progress handler
    /// that reports to `progress`. Task cancellation reaches it twice: `cancel` on the running
    /// call, and the progress handler (called as it starts) for a cancellation that came first.
    func cancellable<T: Sendable>(_ progress: (@Sendable (UpdateProgress) -> Void)?, cancel: @escaping @Sendable () -> Void,
                                  _ call: @escaping @Sendable (@escaping ProgressHandler) throws -> T) async throws(AssetPatchError) -> T {
        let cancelled = Atomic<Bool>(false)
        return try await withTaskCancellationHandler {
            await offPool { () throws(AssetPatchError) in
                try mapped {
                    try call { p in
                        progress?(UpdateProgress(p))
                        return cancelled.load(ordering: .acquiring)
                    }
                }
            }
        } onCancel: {
            cancelled.store(true, ordering: .releasing)
            cancel()
        }.get()
    }

    /// Runs ``update(progress:)`` and yields its progress, then ``UpdateEvent/finished(installed:)``;
    /// the stream throws the update's error. Ending the iteration (a `break`, or cancelling the
    /// consuming task) cancels the update.
    ///
    /// ```swift
    /// for try await event in client.updates() {
    ///     if case let .progress(p) = event, let f = p.fraction { print("\(p.phase) \(Int(f * 100))%") }
    /// }
    /// ```
    public func updates() -> AsyncThrowingStream<UpdateEvent, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    let installed = try await self.update { continuation.yield(.progress($0)) }
                    continuation.yield(.finished(installed: installed))
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Asks a running update to stop soon; it then throws ``AssetPatchError/Status/cancelled``.
    public func cancel() {
        (try? open())?.cancel()
    }

    /// Pauses every transfer of this client (running or started while paused): each stops at
    /// its next piece; past 2 seconds the connections close, and ``resume()`` goes on from the
    /// byte each range reached. Progress reports `paused`.
    public func pause() {
        (try? open())?.transfers.pause()
    }

    /// Lets paused transfers go on.
    public func resume() {
        (try? open())?.transfers.resume()
    }

    /// Runs blocking core work on a thread of its own: an update blocks for seconds and must not
    /// hold one of the few threads of the cooperative pool.
    func offPool<T: Sendable>(_ body: @escaping @Sendable () throws(AssetPatchError) -> T) async -> Result<T, AssetPatchError> {
        await withCheckedContinuation { continuation in
            do {
                try detachThread {
                    do throws(AssetPatchError) {
                        continuation.resume(returning: .success(try body()))
                    } catch {
                        continuation.resume(returning: .failure(error))
                    }
                }
            } catch {
                continuation.resume(returning: .failure(AssetPatchError(.internal, "starting a thread: \(error)")))
            }
        }
    }

    // MARK: Resolving

    /// The absolute path of resource `name` (a relative path such as `"sprites/hero.png"`):
    /// for each variant in order (``Options/variants``), the active release's file, then the
    /// bundle's. No system call, no allocation beyond the returned string; never waits for an
    /// update.
    /// - Throws: ``AssetPatchError`` `.notFound`, or `.argument` for an invalid name (absolute,
    ///   `..`, empty components, not UTF-8).
    public func resolve(_ name: String) throws(AssetPatchError) -> String {
        try resolveVariant(name).path
    }

    /// As ``resolve(_:)``, with the index in ``Options/variants`` of the variant that matched:
    /// with `["@3x", "@2x", ""]`, 1 means an `@2x` file (load it at scale 2).
    public func resolveVariant(_ name: String) throws(AssetPatchError) -> (path: String, variant: Int) {
        let c = try open()
        return try mapped { try c.resolveVariant(name) }
    }

    /// The version served; 0 when only the bundle is.
    public var currentVersion: Int64 { core.currentVersion }

    /// What the last ``check()`` or ``update(progress:)`` found, and why it found nothing to
    /// install (an older manifest, from a stale cache edge, is no update, not an error); nil
    /// before the first.
    public var lastCheck: CheckOutcome? { core.lastCheck.map(CheckOutcome.init) }

    /// Each source (the manifest URL, then ``Options/mirrors``) as the last check or update left
    /// it; empty without mirrors or before the first.
    public var sources: [SourceInfo] {
        core.lastSources.map { e in
            SourceInfo(url: e.head.shown, demoted: e.demoted != nil, servedHead: e.servedHead, requests: e.requests, bytes: e.bytes, last: e.last)
        }
    }

    // MARK: The release lifecycle

    /// Confirms the active release: it is no longer counted towards
    /// ``Options/maxFailedLaunches`` and will not be rolled back automatically.
    /// - Throws: ``AssetPatchError`` `.state` when only the bundle is served.
    public func markGood() throws(AssetPatchError) {
        let c = try open()
        try mapped { try c.markGood() }
    }

    /// Goes back one release: to the newest kept one, or the bundle. Updates skip the version
    /// left until a newer one is published.
    /// - Returns: the version served now (0: the bundle).
    /// - Throws: ``AssetPatchError`` `.state` when only the bundle is served.
    @discardableResult
    public func rollback() throws(AssetPatchError) -> Int64 {
        let c = try open()
        return try mapped { try c.rollback() }
    }

    /// Serves the bundle only and removes every installed release and download. The package
    /// pin and the downgrade mark stay.
    public func reset() throws(AssetPatchError) {
        let c = try open()
        try mapped { try c.reset() }
    }

    /// The lifecycle now: versions active and pending, confirmation, launches, last rollback.
    public func lifecycle() throws(AssetPatchError) -> Lifecycle {
        let c = try open()
        return Lifecycle(try mapped { try c.lifecycle() })
    }

    /// The description of a release (``WhichRelease``), or nil when there is none.
    public func release(_ which: WhichRelease) throws(AssetPatchError) -> ReleaseDetails? {
        let c = try open()
        return try mapped { try c.release(which.core) }.map(ReleaseDetails.init)
    }

    /// Bytes the data directory's releases (hard-linked files counted once) and downloads take.
    public func diskUsage() throws(AssetPatchError) -> (releases: UInt64, downloads: UInt64) {
        let c = try open()
        let u = c.store.usage()
        return (u.releases, u.downloads)
    }

    // MARK: Plugins

    /// Loads plugin `name` of the active release and returns the address of `symbol` (nil: the
    /// plugin's entry symbol). The plugin's bytes are verified against the release record
    /// (sha256, size, ELF machine) before they are mapped; a plugin of a release that was not
    /// signature-verified loads only with ``Options/allowUnsignedPlugins``.
    ///
    /// ```swift
    /// let entry = try client.loadPlugin("greeter")
    /// let greet = unsafeBitCast(entry, to: (@convention(c) () -> UnsafePointer<CChar>).self)
    /// ```
    /// - Throws: ``AssetPatchError`` `.notFound` (no such plugin or symbol), `.integrity`,
    ///   `.signature`, `.archive` (not a shared object for this machine).
    public func loadPlugin(_ name: String, symbol: String? = nil) throws(AssetPatchError) -> UnsafeMutableRawPointer {
        let c = try open()
        return try mapped { try c.loadPlugin(name, symbol: symbol) }
    }

    /// The plugins the active release ships.
    public func plugins() throws(AssetPatchError) -> [PluginInfo] {
        let c = try open()
        return try mapped { try c.listPlugins() }.map { PluginInfo(name: $0.name, version: $0.version, entry: $0.entry, abi: $0.abi) }
    }
}
