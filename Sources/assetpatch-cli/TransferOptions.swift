import ArgumentParser
import AssetPatchCore
import Dispatch
import Glibc

/// How an update or a group fetch of the tool uses the network: a cap, a metered network, and
/// pause and resume by signal (SIGUSR1 pauses, SIGUSR2 resumes: `kill -USR1 <pid>`).
struct TransferOptions: ParsableArguments {
    @Option(name: .customLong("max-speed"), help: "max_recv_speed: bytes per second all transfers share (0: no cap).")
    var maxSpeed: UInt64?
    @Flag(name: .long, help: "The network is metered: refuse (exit 3, ASSETPATCH_ERR_METERED) a transfer planning more than --metered-max-bytes.")
    var metered = false
    @Option(name: .customLong("metered-max-bytes"), help: "What a transfer may plan on a metered network (default 0).")
    var meteredMaxBytes: UInt64?
    @Option(name: .long, help: "foreground or background: background transfers hold while foreground ones run on the data directory (default: background for update, foreground for group fetch).")
    var priority: String?

    /// Sets the options (`priorityOption`: update_priority or fetch_priority) and starts
    /// listening for SIGUSR1 and SIGUSR2; keep what it returns while the transfer runs.
    func configure(_ client: Client, priorityOption: String) throws -> [any DispatchSourceSignal] {
        if let priority { try client.set(priorityOption, priority) }
        if let maxSpeed { try client.set("max_recv_speed", String(maxSpeed)) }
        if metered { try client.set("metered", "1") }
        if let meteredMaxBytes { try client.set("metered_max_bytes", String(meteredMaxBytes)) }
        return [(SIGUSR1, "paused (SIGUSR2 resumes)", { client.transfers.pause() }), (SIGUSR2, "resumed", { client.transfers.resume() })]
            .map { sig, said, act in
                signal(sig, SIG_IGN)  // delivered to the source, not to the default action (exit)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler {
                    act()
                    writeStderr("\n\(said)\n")
                }
                source.resume()
                return source
            }
    }
}
