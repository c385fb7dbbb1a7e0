/// What an update or a check found, whatever happened after: the manifest's offer, why nothing
/// was installed, the mark in force, the rollout, and the judgement by the keys in force. The
/// caller owns it (the updater fills it in as it goes), so it holds what was learnt also when a
/// later step fails: the host's `CheckOutcome` is made from it.
struct Evaluation {
    /// Why nothing is installed, and the version the manifest offered.
    var noUpdate: (reason: NoUpdateReason, version: Int64)?
    /// The version the manifest offered (0: none was read, or a legacy manifest).
    var offered: Int64 = 0
    /// A head was read and decoded (legacy manifests too).
    var headRead = false
    /// The order of what was read (not for a legacy manifest), and the head a format-1
    /// manifest names when the check stopped there to read it (`Updater.evaluate`).
    var read: (order: ManifestOrder, head: String?)?
    /// The head read in place of `manifest_url`, which named it (its URL as shown).
    var namedHead: String?
    /// The manifest that named a head, as fetched, while its head is read (`Updater.evaluate`).
    var naming: (bytes: [UInt8], finalURL: String)?
    var channel: String?
    var expires: Int64?
    /// The downgrade mark in force for the manifest's channel before it was accepted.
    var markInForce: Int64?
    /// The rollout's share in force (basis points) and this client's bucket, when it has one.
    var rollout: (basisPoints: Int32, bucket: Int)?
    /// The keys in force the manifest was judged by, when the client verifies.
    var judgement: Judgement?
    /// Whether that judgement changed what the data directory serves.
    var trustChanged = false
    /// How the release's files arrived: "differential", "whole" (the archive) or "kept" (on disk).
    var route: String?
    /// The check found a release and the update went on to fetch it.
    var updating = false
    /// An earlier attempt's partial archive or verified files of that release were on disk.
    var resumed = false
}
