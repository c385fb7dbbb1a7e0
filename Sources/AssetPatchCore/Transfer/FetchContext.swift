/// Everything a transfer of one update or check needs, carried as one value: the HTTP client,
/// the cancel token, the progress reporter, the log and the retry policy. The place a
/// request's bytes come from is a `Location` given with each transfer; a later feature that
/// spreads requests over mirrors or caps their bandwidth changes this value and what it hands
/// out, not every caller.
struct FetchContext {
    let http: HTTPClient
    let cancel: CancelToken
    let progress: ProgressReporter
    let log: (LogLevel, String) -> Void
    let retry: RetryPolicy
    /// Where the repository is served from (nil: `manifest_url` alone).
    var sources: Sources? = nil

    /// Runs `body`, retried as the policy says for transfers from `source`.
    func retrying<T>(_ source: Location, _ body: () throws -> T) throws -> T {
        try retry.run(source, cancel: cancel, log: log, held: http.settings.control.map { control in
            { try control.waitWhileHeld(background: http.settings.background, cancel: cancel) { progress.again() } }
        }, body)
    }
}

/// What is retried, how often and how long the client waits: transient failures (see
/// `AssetPatchError.transient`) of http(s) transfers, up to `maxRetries` times with exponential
/// backoff from 250 ms, or after the server's Retry-After when it asks for no more than
/// `maxRetryAfterMs`. A local file (file://) is read once: a retry would read the same bytes.
struct RetryPolicy {
    var maxRetries = 3
    /// The longest Retry-After waited for; a server asking for more fails the update at once.
    var maxRetryAfterMs: UInt64 = 30_000

    /// `held`: waits while the client is paused; a transfer the pause took apart (`released`)
    /// is tried again after it, without counting as a retry.
    func run<T>(_ source: Location, cancel: CancelToken, log: (LogLevel, String) -> Void, held: (() throws -> Void)? = nil,
                _ body: () throws -> T) throws -> T {
        if source.isFile { return try body() }
        var attempt = 0
        while true {
            do {
                return try body()
            } catch let e as AssetPatchError where e.released && held != nil {
                try held?()
            } catch let e as AssetPatchError {
                guard e.transient, attempt < maxRetries else { throw e }
                if let asked = e.retryAfterMs, asked > maxRetryAfterMs { throw e }
                attempt += 1
                let delay = max(UInt64(250) << UInt64(attempt - 1), e.retryAfterMs ?? 0)
                log(.warning, "\(e.message); retry \(attempt) of \(maxRetries) in \(delay) ms")
                try cancel.sleep(ms: delay)
            }
        }
    }
}
