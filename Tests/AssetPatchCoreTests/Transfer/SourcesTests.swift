import Testing
@testable import AssetPatchCore

/// Where a location found through one source's head lies on every other source.
@Suite struct SourcesTests {
    func sources(_ primary: String, _ mirrors: [String]) -> Sources {
        Sources(primary: Location(primary)!, mirrors: mirrors.map { Location($0)! }, hedgeMs: 500)
    }

    func urls(_ s: Sources, _ url: String) -> [String?] { s.locations(for: Location(url)!).map { $0?.url } }

    @Test func anArchiveNextToTheHeadIsNextToEveryHead() {
        let s = sources("https://cdn.example/game/head.json", ["https://origin.example/mirror/game/head.json", "http://10.0.0.2/head.json"])
        #expect(urls(s, "https://cdn.example/game/archives/ab.zip") == [
            "https://cdn.example/game/archives/ab.zip", "https://origin.example/mirror/game/archives/ab.zip", "http://10.0.0.2/archives/ab.zip",
        ])
    }

    @Test func aChannelsArchiveTwoLevelsUpIsTwoLevelsUpOnEveryMirror() {
        let s = sources("https://cdn.example/game/channels/beta/head.json", ["https://m.example/x/channels/beta/head.json"])
        #expect(urls(s, "https://cdn.example/game/archives/ab.zip") == [
            "https://cdn.example/game/archives/ab.zip", "https://m.example/x/archives/ab.zip",
        ])
    }

    @Test func theHeadItWasFoundThroughWinsOverAShallowerOneOnTheSameHost() {
        // Found through the mirror's head in /m/: relative to it, not to the primary's at the root.
        let s = sources("https://h.example/head.json", ["https://h.example/m/head.json"])
        s.servedHead(1, finalURL: "https://h.example/m/head.json", "served")
        #expect(urls(s, "https://h.example/m/archives/ab.zip") == ["https://h.example/archives/ab.zip", "https://h.example/m/archives/ab.zip"])
        // A group fetch knows no served head: the same-origin head sharing the most directories.
        let t = sources("https://h.example/head.json", ["https://h.example/m/head.json"])
        #expect(urls(t, "https://h.example/m/archives/ab.zip") == ["https://h.example/archives/ab.zip", "https://h.example/m/archives/ab.zip"])
    }

    @Test func aRedirectedHeadResolvesFromWhereItLanded() {
        let s = sources("https://cdn.example/game/head.json", ["https://m.example/game/head.json"])
        s.servedHead(0, finalURL: "https://cdn.example/v2/game/head.json", "served")
        #expect(urls(s, "https://cdn.example/v2/game/archives/ab.zip") == [
            "https://cdn.example/v2/game/archives/ab.zip", "https://m.example/game/archives/ab.zip",
        ])
    }

    @Test func aLocationOnAnotherHostIsTheSameForEverySource() {
        let s = sources("https://cdn.example/game/head.json", ["https://m.example/game/head.json"])
        #expect(urls(s, "https://github.com/org/app/releases/download/v7/ab.zip") == [
            "https://github.com/org/app/releases/download/v7/ab.zip", "https://github.com/org/app/releases/download/v7/ab.zip",
        ])
    }

    @Test func hostsCompareWithoutCaseAndTheDefaultPort() {
        let s = sources("https://CDN.example:443/game/head.json", ["https://m.example/game/head.json"])
        #expect(urls(s, "https://cdn.example/game/archives/ab.zip")[1] == "https://m.example/game/archives/ab.zip")
    }

    @Test func relativeReferencesResolveBackToTheURL() {
        for (url, base) in [("https://h/a/b/c.zip", "https://h/a/head.json"), ("https://h/x.zip", "https://h/a/b/head.json"),
                            ("https://h/a/b/c.zip?t=1", "https://h/a/b/head.json"), ("https://h/a:b/c.zip", "https://h/head.json"),
                            ("https://h/a/head.json", "https://h/a/head.json")] {
            let r = Sources.relative(url, from: base)
            #expect(r != nil && URLs.resolve(r!, against: base) == url, "\(url) from \(base): \(r ?? "nil")")
        }
        #expect(Sources.relative("https://other/a.zip", from: "https://h/head.json") == nil)
    }

    @Test func headersGoToThePrimarysOriginOnly() {
        var settings = HTTPSettings()
        settings.headers = ["Authorization: Bearer t"]
        #expect(settings.headers(for: "https://m.example/a.zip") == ["Authorization: Bearer t"])  // no mirrors: as before
        settings.headersOrigin = URLs.origin("https://cdn.example/game/head.json")
        #expect(settings.headers(for: "https://CDN.example:443/game/keys/2.json") == ["Authorization: Bearer t"])
        #expect(settings.headers(for: "https://m.example/game/keys/2.json").isEmpty)
        #expect(settings.headers(for: "http://cdn.example/game/head.json").isEmpty)  // another scheme, another origin
    }

    @Test func mirrorsOfAnotherKindAreLeftOut() {
        let s = sources("https://cdn.example/head.json", ["file:///srv/repo/head.json", "https://m.example/head.json"])
        #expect(s.count == 2 && s.label(1) == "https://m.example/head.json")
    }

    @Test func aDemotedSourceStaysDemotedUntilEveryOneIsThenAllComeBack() {
        let s = sources("https://a.example/head.json", ["https://b.example/head.json"])
        s.demote(0, "refused")
        #expect(s.usable() == [1])
        s.revive()
        #expect(s.usable() == [1])
        s.demote(1, "503")
        #expect(s.usable().isEmpty)
        s.revive()
        #expect(s.usable() == [0, 1])
    }
}
