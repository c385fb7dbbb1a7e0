import Glibc
import Synchronization

/// One client of a data directory. It coordinates threads and state: the options, the snapshot
/// resolving reads (`ResolveView`), one update at a time (blocking or on a background thread,
/// run by an `Updater` under the data directory's lock), cancellation and logging. Every
/// method is thread-safe.
package final class Client: @unchecked Sendable {  // mutable state is behind Locked/Atomic/Condition
    package let store: Store
    package let bundleDir: String?
    private let config: Locked<ClientConfig>
    /// What resolving reads: read without a lock, replaced as a whole (`ReadMostly`).
    let view: ReadMostly<ResolveView>
    /// What this client serves (`ServedRelease`): set with `view`, by `serve` only.
    let served = Locked<ServedRelease?>(nil)
    private let cancelToken = CancelToken()
    /// The cap, pause and foreground work every transfer of this client obeys.
    package let transfers: TransferControl
    /// The group fetches running now (`cancel` stops them too), the bytes each has so far, and
    /// the pinned groups (as this client last read or wrote them).
    let groupCancels = Locked<[CancelToken]>([])
    let groupProgress = Locked<[String: UInt64]>([:])
    let groupPins = Locked<Set<String>>([])
    let updating = Atomic<Bool>(false)
    private let logger = Locked<(@Sendable (LogLevel, String) -> Void)?>(nil)
    /// What the open did that the host should hear of (a crash-loop rollback): logged to the
    /// first logger installed, since none can be installed before the open.
    private var openMessages: [(LogLevel, String)] = []  // written in init, then only under `logger`
    private let plugins = PluginLoader()
    /// The release the last check found (nil: none, or nothing new).
    let lastCandidate = Locked<ReleaseSummary?>(nil)
    /// What the last check or update found (`lastCheck`).
    private let lastOutcome = Locked<CheckOutcome?>(nil)
    /// Each source's state at the end of the last check or update (with mirrors).
    private let lastSourceEntries = Locked<[Sources.Entry]>([])
    /// What outcome events carry that options set (`EventContext`), and the host's live callback.
    let eventContext: Locked<EventContext>
    let eventCallback = Locked<(@Sendable (String) -> Void)?>(nil)

    private enum Background { case idle, running, finished(Status, String) }
    private let background = Condition()
    private var backgroundState = Background.idle   // guarded by `background`
    private var backgroundThread: pthread_t?          // guarded by `background`

    /// Opens (creating if needed) `dataDir`, recovers from an interrupted update, activates a
    /// release installed with apply=next_open, and indexes the active release and the bundle.
    /// `countsLaunch`: false for tools that open the data directory without being the app (the
    /// command-line tool): no launch is counted and no crash-loop rollback happens.
    package init(dataDir: String, bundleDir: String?, countsLaunch: Bool = true) throws {
        // On the host's thread, before any update thread exists (see `CurlGlobal`); a failure
        // is reported by the first HTTP transfer, and file:// updates don't need libcurl.
        _ = try? CurlGlobal.initialize()
        store = try Store(root: dataDir)
        eventContext = Locked(EventContext.load(store))
        var bundle: String?
        if let bundleDir {
            let abs = FS.absolute(bundleDir)
            guard FS.isDirectory(abs) else { throw AssetPatchError(.io, "bundle_dir \(abs): not a directory") }
            bundle = abs
        }
        self.bundleDir = bundle
        let transfers = TransferControl(foregroundLock: store.transfersLockPath)
        self.transfers = transfers
        config = Locked({
            var c = ClientConfig()
            c.http.control = transfers
            return c
        }())
        view = ReadMostly(ResolveView(release: nil, bundle: nil, variants: [[]], activeVersion: 0))

        // The launch count (and a next_open activation, and a crash-loop rollback) go through
        // the state lock, so concurrent opens never lose a count. Recovery deletes directories:
        // only under the update lock; if another process is updating, it owns that work.
        // The bundle first: an app upgrade whose bundle carries a newer release than the active
        // one ends that release before a launch of it is counted.
        let marker = bundle.flatMap(BundleMarker.load)
        let fingerprint = bundle.map(BundleMarker.fingerprint)
        var facts = OpenFacts()
        var (messages, state) = try store.modifyState { s -> [(LogLevel, String)] in
            var out: [(LogLevel, String)] = []
            let now = unixTime()
            if let fingerprint, s.bundleFingerprint != fingerprint {
                if s.bundleFingerprint != nil { out.append((.info, "the bundle changed since the last open (an app upgrade)")) }
                s.bundleFingerprint = fingerprint
            }
            switch marker {
            case .none: s.bundleVersion = 0
            case let .failure(e)?:
                s.bundleVersion = 0
                out.append((.warning, e.message))
            case let .success(m)?:
                // The bundle marker is the app's word on its package: it pins it before any
                // manifest is seen (the package option alone ranks above it).
                if let message = s.pin(m.package, by: .bundle, now: now) { out.append((.warning, message)) }
                if let pinned = s.pin, pinned.name != m.package {
                    s.bundleVersion = 0
                    out.append((.warning, "the bundle marker names package \"\(m.package)\", not \"\(pinned.name)\" named by the package option; its version is ignored"))
                } else {
                    s.bundleVersion = m.version
                    let leaving = s.active
                    if let message = s.supersede(keeping: { $0.version > m.version },
                                                 reason: "app upgrade: the bundle carries version \(m.version)", now: now) {
                        out.append((.warning, message))
                        if let leaving, let record = s.lastRollback {
                            facts.rollback = (record, .appUpgrade, leaving.channelName)
                        }
                    }
                }
            }
            s.bundlePackage = (try? marker?.get())?.package
            if countsLaunch {
                let pending = s.pending, opened = s.pending ?? s.active, counted = pending != nil ? 1 : s.launches + 1
                if let message = try s.countLaunch(now: now) {
                    out.append((.warning, message))
                    if let opened, let record = s.lastRollback {
                        facts.launched = (opened, counted, s.maxFailedLaunches)
                        facts.rollback = (record, .crashLoop, opened.channelName)
                    }
                } else if let a = s.active, a.id == opened?.id, !s.good.contains(a.id) {
                    facts.launched = (a, s.launches, s.maxFailedLaunches)
                }
                facts.activated = pending
            } else {
                _ = s.activatePending()
            }
            return out
        }
        // At once: a crash-loop rollback is reported even if what follows fails or the process
        // is killed during the clean-up.
        emit(facts.events, state: state)
        if let lock = try store.tryLock() {
            try store.recover(state)
            if let lost = try store.dropLostReleases(state) {
                messages.append((.warning, lost))
                state = try store.loadState()
            }
            for lost in try store.dropLostGroups(state) { messages.append((.warning, lost)) }
            _ = lock
        }
        if state.highestVerifiedVersion == nil { try migrateTrust() }
        openMessages = messages
        groupPins.withLock { $0 = Set(state.groups.pinned) }
        let bundleIndex = try bundle.map { NameTable(root: $0, names: try FS.walkFiles($0).filter(ResourceName.isValid)) }
        view.replace { _ in ResolveView(release: nil, bundle: bundleIndex, variants: [[]], activeVersion: 0) }
        // The active release, leased; another process may have moved on since the state was
        // read (and cleaned the release up): read it again then.
        var active = state.active
        for _ in 0..<3 {
            guard let ref = active, !FS.isDirectory(store.releaseDir(ref.id)) else { break }
            active = try store.loadState().active
        }
        try serve(active)
    }

    /// The release's name table and groups. Fast path: the NUL-separated names file and the
    /// group table (no JSON, no hashes); release.json otherwise.
    func loadIndex(_ ref: ReleaseRef, excluding: Set<String> = []) throws -> (NameTable, [ReleaseGroup]) {
        let dir = store.releaseDir(ref.id)
        if let bytes = store.loadNames(ref.id) {
            let table = store.loadGroupTable(ref.id, names: bytes)
            if table != .none, let index = NameTable(releaseDir: dir, nulSeparated: bytes, groups: table ?? nil, excluding: excluding) {
                return (index, table??.groups ?? [])
            }
        }
        let info = try store.loadRelease(ref.id)
        return (NameTable(releaseDir: dir, files: info.files, groups: info.groups, excluding: excluding), info.groups)
    }

    // MARK: Options and logging

    package func set(_ option: String, _ value: String) throws {
        try config.withLock { try $0.set(option, value) }
        keepEventContext(option)
        if option == "app_version", let app = configuration.appVersion {
            try judgeInstalledReleases(appVersion: app)
        }
        if option == "package", let name = configuration.package {
            try pinPackage(name)
        }
        if option == "public_keys" || option == "key_document" {
            try judgeUnverifiedReleases()
        }
        if option == "max_failed_launches" {
            // In force for every client of this data directory, from the next open on.
            let n = configuration.maxFailedLaunches
            try store.modifyState { $0.maxFailedLaunches = n }
        }
        if option == "max_recv_speed" { transfers.maxRecvSpeed = configuration.maxRecvSpeed }
        if option == "variants" {
            let variants = config.withLock { $0.variants.map { Array($0.utf8) } }
            view.replace { $0.with(variants: variants) }
        }
    }

    package var configuration: ClientConfig { config.withLock { $0 } }

    /// The host's own transport for every later request of this client (nil: libcurl).
    package func setTransport(_ transport: HostTransport?) {
        config.withLock { $0.http.transport = transport }
    }

    package func setLogger(_ fn: (@Sendable (LogLevel, String) -> Void)?) {
        let held: [(LogLevel, String)] = logger.withLock {
            $0 = fn
            guard fn != nil else { return [] }
            defer { openMessages = [] }
            return openMessages
        }
        for (level, message) in held { fn?(level, message) }
    }

    func log(_ level: LogLevel, _ message: String) {
        if let fn = logger.withLock({ $0 }) { fn(level, message) }
    }

    /// Runs a host's call: a failure is logged once, at error level, with the message the
    /// caller gets, and thrown on.
    func loggingFailure<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as AssetPatchError {
            log(.error, e.message)
            throw e
        }
    }

    // MARK: Updating

    /// Fetches and judges the manifest only. nil: no update.
    package func check() throws -> CheckResult? {
        try preview().map { CheckResult(version: $0.version, downloadBytes: $0.transferBytes) }
    }

    /// Fetches and judges the manifest and plans the update without transferring any file. nil:
    /// no update. `recordAcceptance`: pin the package and move the downgrade mark as a check
    /// does; false leaves the data directory as it was (an inspection).
    package func preview(recordAcceptance: Bool = true) throws -> UpdatePreview? {
        let updater = makeUpdater(progress: nil, readOnly: !recordAcceptance)
        var mark: Int64 = 0
        var e = Evaluation()
        defer { if e.trustChanged && recordAcceptance { try? serveJudged() } }
        defer { keepSources(updater) }
        do {
            var state = try store.loadState()
            let before = state
            mark = before.downgradeMarkAnyChannel(verifying: updater.config.verifies)
            let found = try updater.preview(&state, &e)
            if recordAcceptance && state != before {
                try? store.recordAcceptance(state, before: before, judgement: e.judgement)
            }
            lastCandidate.withLock { $0 = found?.candidate }
            record(e, found == nil ? .noUpdate : .ok, mark: mark, sourceIndex: updater.context.sources?.served)
            if recordAcceptance { emit(checkEvent(e, found == nil ? .noUpdate : .ok, source: updater.context.sources?.served), state: state) }
            return found
        } catch let error as AssetPatchError {
            record(e, error.status, mark: mark, sourceIndex: updater.context.sources?.served)
            if recordAcceptance { emit(checkEvent(e, error.status, source: updater.context.sources?.served)) }
            log(.error, error.message)
            throw error
        }
    }

    /// Keeps what a check or update found, for `lastCheck`.
    private func record(_ e: Evaluation, _ status: Status, mark: Int64, sourceIndex: Int? = nil) {
        let reason = status == .noUpdate ? e.noUpdate?.reason : nil
        var outcome = CheckOutcome(status: status, reason: reason, manifestVersion: e.noUpdate?.version ?? e.offered,
                                   acceptedVersion: e.markInForce ?? mark)
        outcome.channel = e.channel
        outcome.manifestExpires = e.expires
        outcome.rollout = e.rollout
        outcome.namedHead = e.namedHead
        outcome.source = sourceIndex ?? (e.headRead ? 0 : nil)
        lastOutcome.withLock { $0 = outcome }
    }

    /// What the last check or update of this client found, and why it found nothing to install;
    /// nil before the first.
    package var lastCheck: CheckOutcome? { lastOutcome.withLock { $0 } }

    private func keepSources(_ updater: Updater) {
        lastSourceEntries.withLock { $0 = updater.context.sources?.snapshot ?? [] }
    }

    /// Each source (manifest_url, then the mirrors) as the last check or update left it: its
    /// last result, whether it was demoted, what it delivered. Empty without mirrors.
    package var lastSources: [Sources.Entry] { lastSourceEntries.withLock { $0 } }

    private func makeUpdater(progress: ProgressHandler?, readOnly: Bool = false) -> Updater {
        var config = configuration
        config.http.background = !config.updateForeground
        return Updater(store: store, config: config, bundleDir: bundleDir, cancel: cancelToken, progress: progress,
                readOnly: readOnly) { [weak self] level, message in
            self?.log(level, message)
        }
    }

    /// Check + download + install + activate. true: a release was installed; false: no update.
    package func update(progress: ProgressHandler?) throws -> Bool {
        guard updating.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            throw AssetPatchError(.busy, "an update is already running on this client")
        }
        defer { updating.store(false, ordering: .releasing) }
        cancelToken.reset()
        return try runUpdate(progress: progress)
    }

    /// One update under the data directory's lock. A failure is logged once, at error level,
    /// with the message the caller gets.
    private func runUpdate(progress: ProgressHandler?) throws -> Bool {
        if configuration.updateForeground { return try transfers.foreground { try runUpdateOnce(progress: progress) } }
        return try runUpdateOnce(progress: progress)
    }

    private func runUpdateOnce(progress: ProgressHandler?) throws -> Bool {
        let timeline = UpdateTimeline()
        let updater = makeUpdater(progress: timeline.observing(progress))
        var mark: Int64 = 0
        var e = Evaluation()
        var finished = Status.internal
        defer {
            emit(updateEvents(e, finished, timeline, source: updater.context.sources?.served, apply: updater.config.apply))
        }
        defer { if e.trustChanged { try? serveJudged() } }
        defer { keepSources(updater) }
        do {
            guard configuration.manifest != nil else { throw AssetPatchError(.state, "no manifest_url set") }
            guard let lock = try store.tryLock() else {
                throw AssetPatchError(.busy, "another update is running on \(store.root)")
            }
            defer { _ = lock }
            var state = try store.loadState()
            mark = state.downgradeMarkAnyChannel(verifying: updater.config.verifies)
            // Only the release's reference is kept from the outcome: the update's list of the
            // release's files goes before the release is served.
            let installed: ReleaseRef? = try {
                if case let .installed(candidate) = try updater.run(&state, &e) { return candidate.ref }
                return nil
            }()
            finished = installed == nil ? .noUpdate : .ok
            record(e, finished, mark: mark, sourceIndex: updater.context.sources?.served)
            guard let installed else { return false }
            if configuration.apply == .immediate {
                try serve(installed)
                // The release this client served until now may have been kept from the
                // clean-up by its own lease (keep_versions=0): it can go now.
                _ = try? store.collectGarbage(try store.loadState())
            }
            return true
        } catch let error as AssetPatchError {
            finished = error.status
            record(e, error.status, mark: mark, sourceIndex: updater.context.sources?.served)
            log(.error, error.message)
            throw error
        }
    }

    /// Runs `update` on a background thread.
    package func startUpdate(progress: ProgressHandler?) throws {
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
    package func waitUpdate(timeoutMs: Int) throws -> (Status, String)? {
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
    package func cancel() {
        cancelToken.cancel()
        for t in groupCancels.withLock({ $0 }) { t.cancel() }
    }

    /// Cancels a running update, waits for it to stop, and lets go of the release this client
    /// served (its lease): another client's clean-up may then delete it if it is neither active
    /// nor kept.
    package func close() {
        cancelToken.cancel()
        for t in groupCancels.withLock({ $0 }) { t.cancel() }
        background.locked {
            while case .running = backgroundState { background.wait(until: nil) }
            if let t = backgroundThread { pthread_join(t, nil); backgroundThread = nil }
        }
        served.withLock { $0 = nil }
    }

    // MARK: Plugins

    /// The address of `symbol` (nil: the plugin's declared entry) in plugin `name` of the active
    /// release, loaded from verified bytes (see `PluginLoader`).
    package func loadPlugin(_ name: String, symbol: String?) throws -> UnsafeMutableRawPointer {
        try loggingFailure {
            let v = view.read { $0 }
            let ref = servedRelease?.ref
            do {
                let served = try servedRelease.map { s in
                    (s.ref, try s.info(store), Set(s.groups.filter { $0.delivery == .install || v.isLocal(group: $0.name) }.map(\.name)))
                }
                return try plugins.load(store, served, name: name, symbol: symbol, allowUnsigned: configuration.allowUnsignedPlugins)
            } catch let e as AssetPatchError where ![.notFound, .notLocal, .argument, .state, .signature].contains(e.status) {
                // A plugin that is not there (a host probing), not local yet, or refused by this
                // host's own settings is no failure of the release.
                emit(OutcomeEvent(.pluginLoadFailed, version: ref?.version ?? 0, channel: ref?.channelName,
                                  [("plugin", .string(name)), ("result", .string(e.status.eventCode))]))
                throw e
            }
        }
    }

    /// The plugins of the release this client serves.
    package func listPlugins() throws -> [PluginListing] { try plugins.list(try servedRelease.map { ($0.ref, try $0.info(store)) }) }
}
