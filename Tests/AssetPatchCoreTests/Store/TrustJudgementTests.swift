import Glibc
import Testing
@testable import AssetPatchCore

/// `StoreState.judge`: what was accepted, judged by the signing keys in force.
@Suite struct TrustJudgementTests {
    let k1 = [UInt8](repeating: 1, count: 32), k2 = [UInt8](repeating: 2, count: 32), k3 = [UInt8](repeating: 3, count: 32)

    func ref(_ version: Int64, signers: [[UInt8]]?, content: String? = "c") -> ReleaseRef {
        ReleaseRef(id: "\(version)-0123456789abcdef", version: version, verified: true, signers: signers, content: content)
    }

    /// k1 and k2 both signed (threshold 1); the halt (5, 11) by k1 alone, the publish before it
    /// (5, 10) by k2. Retiring k1 leaves the mark at what k2 signed, not at the releases on disk.
    @Test func aMarkFallsBackToWhatTheKeysStillInForceSigned() {
        var s = StoreState()
        s.active = ref(4, signers: [k1])
        s.note(order: ManifestOrder(version: 5, revision: 10), verified: true, signers: [k2], channel: "stable")
        s.note(order: ManifestOrder(version: 5, revision: 11), verified: true, signers: [k1], channel: "stable")
        #expect(s.downgradeMark(verifying: true) == ManifestOrder(version: 5, revision: 11))
        let message = s.judge(under: KeySet(keys: [k2], threshold: 1), vouch: nil, legacy: .unknown, verifiedBefore: [:], now: 0)
        #expect(message != nil)
        #expect(s.downgradeMark(verifying: true) == ManifestOrder(version: 5, revision: 10))
        #expect(s.active == nil, "version 4, signed by k1 alone, is no longer served")
        // Judged again by the same keys: nothing moves.
        let again = s
        #expect(s.judge(under: KeySet(keys: [k2], threshold: 1), vouch: nil, legacy: .unknown, verifiedBefore: [:], now: 0) == nil && s == again)
    }

    /// A threshold of 2: a key's own mark counts only with another key's at or above it.
    @Test func aThresholdNeedsThatManyKeysAtTheMark() {
        var mark = ChannelMark()
        mark.raise(k1, to: ManifestOrder(version: 9))
        mark.raise(k2, to: ManifestOrder(version: 7))
        mark.raise(k3, to: ManifestOrder(version: 3))
        #expect(mark.vouched(by: KeySet(keys: [k1, k2, k3], threshold: 2)) == ManifestOrder(version: 7))
        #expect(mark.vouched(by: KeySet(keys: [k1, k3], threshold: 2)) == ManifestOrder(version: 3))
        #expect(mark.vouched(by: KeySet(keys: [k1], threshold: 1)) == ManifestOrder(version: 9))
        #expect(mark.vouched(by: KeySet(keys: [k1, k2], threshold: 2)) == ManifestOrder(version: 7))
    }

    /// Releases and marks from before signers were recorded: kept while nothing that signed them
    /// can have been retired, ended when the keys they were accepted under are unknown.
    @Test func whatWasAcceptedBeforeSignersWereRecorded() {
        var legacy = StoreState()
        legacy.active = ref(2, signers: nil, content: nil)
        legacy.channelMarks["stable"] = ChannelMark(highest: ManifestOrder(version: 2), highestVerified: ManifestOrder(version: 2))
        legacy.highestVerifiedVersion = 2

        var same = legacy
        #expect(same.judge(under: KeySet(keys: [k1], threshold: 1), vouch: nil, legacy: .keys(KeySet(keys: [k1], threshold: 1)),
                           verifiedBefore: [:], now: 0) == nil)
        #expect(same.active?.version == 2 && same.legacyTrust == .keys(KeySet(keys: [k1], threshold: 1)))
        // Later, k1 is retired: what only the legacy keys vouched for ends.
        #expect(same.judge(under: KeySet(keys: [k2], threshold: 1), vouch: nil, legacy: .unknown, verifiedBefore: [:], now: 0) != nil)
        #expect(same.active == nil && same.downgradeMark(verifying: true) == .zero)

        var unknown = legacy
        #expect(unknown.judge(under: KeySet(keys: [k1], threshold: 1), vouch: nil, legacy: .unknown, verifiedBefore: [:], now: 0) != nil)
        #expect(unknown.active == nil && unknown.legacyTrust == .unknown)

        // A root-key rotation that keeps the signing keys ends nothing; a raised threshold does.
        var raised = legacy
        #expect(raised.judge(under: KeySet(keys: [k1, k2], threshold: 1), vouch: nil, legacy: .keys(KeySet(keys: [k1, k2], threshold: 1)),
                             verifiedBefore: [:], now: 0) == nil)
        #expect(raised.judge(under: KeySet(keys: [k1, k2], threshold: 2), vouch: nil, legacy: .unknown, verifiedBefore: [:], now: 0) != nil)
    }

    /// A manifest signed by the keys in force vouches again for the same release (id and content),
    /// never for another content under the same id, nor for a release installed unverified.
    @Test func aResignedReleaseIsVouchedForAgain() {
        var s = StoreState()
        s.active = ref(3, signers: [k1], content: "genuine")
        s.kept = [ref(2, signers: [k1], content: "genuine-2")]
        let keys = KeySet(keys: [k2], threshold: 1)
        let other = Vouch(releaseID: "3-0123456789abcdef", content: "thief", signers: [k2])
        var thief = s
        _ = thief.judge(under: keys, vouch: other, legacy: .unknown, verifiedBefore: [:], now: 0)
        #expect(thief.active == nil)
        _ = s.judge(under: keys, vouch: Vouch(releaseID: "3-0123456789abcdef", content: "genuine", signers: [k2]), legacy: .unknown,
                    verifiedBefore: [:], now: 0)
        #expect(s.active?.version == 3 && s.active?.signers == [k2] && s.kept.isEmpty)
        var unverified = StoreState()
        unverified.active = ReleaseRef(id: "3-0123456789abcdef", version: 3, verified: false, content: "genuine")
        _ = unverified.judge(under: keys, vouch: Vouch(releaseID: "3-0123456789abcdef", content: "genuine", signers: [k2]),
                             legacy: .unknown, verifiedBefore: [:], now: 0)
        #expect(unverified.active == nil)
    }

    /// The state file keeps what the judgement reads.
    @Test func theStateKeepsSignersMarksAndPins() throws {
        var s = StoreState()
        s.active = ref(3, signers: [k1, k2])
        s.note(order: ManifestOrder(version: 3, revision: 4), verified: true, signers: [k1, k2], channel: "beta")
        s.channelPin = ChannelPin(name: "beta", source: .option)
        s.legacyTrust = .keys(KeySet(keys: [k3], threshold: 1))
        #expect(StoreState.from(try JSONParser.parse(Array(s.toJSON().serialized().utf8))) == s)
        s.legacyTrust = .unknown
        #expect(StoreState.from(try JSONParser.parse(Array(s.toJSON().serialized().utf8))) == s)
    }

    /// The kept key document never goes back: a process that followed less does not overwrite it.
    @Test func theKeptKeyDocumentNeverGoesBack() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let store = try Store(root: dir.path)
        let anchor = KeyDocument.pinned([k1])
        func doc(_ v: Int64) -> KeyDocument { KeyDocument(version: v, expires: unixTime() + 3600, root: KeySet(keys: [k1], threshold: 1), signing: KeySet(keys: [k2], threshold: 1)) }
        try store.keepKeyDocumentIfNewer(doc(5), anchor: anchor)
        try store.keepKeyDocumentIfNewer(doc(4), anchor: anchor)
        #expect(store.keptKeyDocument(anchor: anchor)?.version == 5)
        try store.keepKeyDocumentIfNewer(doc(6), anchor: anchor)
        #expect(store.keptKeyDocument(anchor: anchor)?.version == 6)
        #expect(store.keptKeyDocument(anchor: KeyDocument.pinned([k3])) == nil, "kept per anchor")
    }
}
