import AssetPatchCore

/// `assetpatch report`'s page: one self-contained HTML file (no script, no request), every
/// figure also in a `data-` attribute of its element, as the JSON output names it.
enum ReportPage {
    static func html(_ r: RepositoryReport) -> String {
        let package = r.channels.first?.package ?? "?"
        var out = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(esc(package)): release report</title>
        <style>
        body { font: 14px/1.45 system-ui, sans-serif; color: #1d2327; margin: 2em auto; max-width: 1100px; padding: 0 1em; }
        h1 { font-size: 1.6em; margin-bottom: 0; } h1 small { color: #646970; font-weight: normal; font-size: .6em; }
        h2 { font-size: 1.2em; border-bottom: 1px solid #dcdcde; padding-bottom: .2em; margin-top: 2em; }
        table { border-collapse: collapse; margin: .5em 0; } th, td { padding: .3em .7em; border: 1px solid #dcdcde; text-align: left; }
        th { background: #f6f7f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
        .halt { color: #b32d2e; font-weight: 600; } .ok { color: #00733c; } .crossed { background: #fcf0f1; color: #b32d2e; font-weight: 600; }
        .muted { color: #8c8f94; } .note { color: #50575e; max-width: 60em; }
        svg text { font: 11px system-ui, sans-serif; fill: #50575e; }
        </style></head><body>
        <h1>\(esc(package)) <small>release report of \(esc(r.repo)), \(RFC3339.format(r.generated))</small></h1>

        """
        out += channels(r) + timeline(r) + keys(r) + costs(r) + health(r)
        out += "<p class=\"muted\">Written by assetpatch \(AssetPatchVersion.string) from the repository's files alone.</p>\n</body></html>\n"
        return out
    }

    static func channels(_ r: RepositoryReport) -> String {
        var s = "<section id=\"channels\"><h2>Channels</h2>\n<table><tr><th>channel</th><th>version</th><th>label</th><th>offered to</th><th>revision</th><th>signed</th><th>expires</th><th>archive</th></tr>\n"
        for c in r.channels {
            let share = c.rollout?.percent(at: r.generated)
            let offered = share == 0 ? "<span class=\"halt\">halted</span>" : esc(c.rollout?.summary ?? "every client")
            s += "<tr data-channel=\"\(esc(c.name))\" data-version=\"\(c.version)\" data-percent=\"\(share.map(Rollout.format) ?? "100")\">"
            s += "<td>\(esc(c.name))</td><td class=\"num\">\(c.version)</td><td>\(esc(c.label ?? ""))</td><td>\(offered)</td>"
            s += "<td class=\"num\">\(c.revision.map(String.init) ?? "")</td><td>\(esc(c.signed ?? ""))</td><td>\(esc(c.expires ?? "never"))</td>"
            s += "<td class=\"num\" data-bytes=\"\(c.archiveBytes)\">\(formatBytes(c.archiveBytes))</td></tr>\n"
        }
        return s + "</table></section>\n"
    }

    /// Each channel's share over its signings, as a step chart, then the signings themselves.
    static func timeline(_ r: RepositoryReport) -> String {
        var s = "<section id=\"timeline\"><h2>Rollouts over time</h2>\n"
        guard !r.signings.isEmpty else {
            return s + "<p class=\"note\">No signing log (<code>history/signings.jsonl</code>): this repository's signings predate it.</p></section>\n"
        }
        let width = 1000.0, height = 40.0 + 110.0 * Double(Set(r.signings.map(\.channel)).count)
        // Signings evenly apart in the order they happened (their times are in the table): a
        // day of steps and a month of quiet read alike.
        let slots = Double(r.signings.count)
        func x(_ index: Int) -> Double { 60 + Double(index) / slots * (width - 80) }
        s += "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"share of clients over time, per channel\">\n"
        let channelNames = r.signings.map(\.channel).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        for (i, name) in channelNames.enumerated() {
            let top = 24.0 + 110.0 * Double(i), bottom = top + 70
            func y(_ p: Double) -> Double { bottom - p / 100 * 70 }
            s += "<text x=\"0\" y=\"\(top + 10)\">\(esc(name))</text>"
            s += "<line x1=\"60\" y1=\"\(bottom)\" x2=\"\(width - 20)\" y2=\"\(bottom)\" stroke=\"#dcdcde\"/>"
            s += "<text x=\"30\" y=\"\(y(100) + 4)\">100%</text><text x=\"42\" y=\"\(bottom + 4)\">0%</text>\n"
            let mine = r.signings.enumerated().filter { $0.element.channel == name }.map(\.offset)
            var points: [String] = []
            for (j, index) in mine.enumerated() {
                let g = r.signings[index]
                let p = g.percent ?? 100
                let xEnd = j + 1 < mine.count ? x(mine[j + 1]) : x(r.signings.count)
                points.append("\(fmt(x(index))),\(fmt(y(p)))")
                points.append("\(fmt(xEnd)),\(fmt(y(p)))")
                let colour = p == 0 ? "#b32d2e" : "#2271b1"
                s += "<circle cx=\"\(fmt(x(index)))\" cy=\"\(fmt(y(p)))\" r=\"3.5\" fill=\"\(colour)\"><title>\(RFC3339.format(g.time)): version \(g.version) to \(Rollout.format(p))%</title></circle>"
                s += "<text x=\"\(fmt(x(index) + 4))\" y=\"\(fmt(y(p) - 5))\">v\(g.version) \(p == 0 ? "halt" : Rollout.format(p) + "%")</text>\n"
            }
            s += "<polyline fill=\"none\" stroke=\"#2271b1\" stroke-width=\"1.5\" points=\"\(points.joined(separator: " "))\"/>\n"
        }
        s += "</svg>\n<table><tr><th>signed</th><th>channel</th><th>version</th><th>revision</th><th>offered to</th></tr>\n"
        for g in r.signings.reversed() {
            let p = g.percent
            let offered = p == 0 ? "<span class=\"halt\">halted</span>" : p.map { Rollout.format($0) + "%" } ?? "every client"
            s += "<tr class=\"signing\" data-channel=\"\(esc(g.channel))\" data-version=\"\(g.version)\" data-percent=\"\(p.map(Rollout.format) ?? "100")\">"
            s += "<td>\(RFC3339.format(g.time))</td><td>\(esc(g.channel))</td><td class=\"num\">\(g.version)</td>"
            s += "<td class=\"num\">\(g.revision.map(String.init) ?? "")</td><td>\(offered)\(g.schedule > 0 ? ", then \(g.schedule) scheduled steps" : "")</td></tr>\n"
        }
        return s + "</table></section>\n"
    }

    static func keys(_ r: RepositoryReport) -> String {
        var s = "<section id=\"keys\"><h2>Key chain</h2>\n"
        guard !r.keys.isEmpty else {
            return s + "<p class=\"note\">No key documents: releases are signed by the keys clients pin (or not signed).</p></section>\n"
        }
        s += "<table><tr><th>document</th><th>root keys</th><th>signing keys</th><th>expires</th></tr>\n"
        for k in r.keys {
            s += "<tr data-key-document=\"\(k.version)\"><td class=\"num\">\(k.version)</td><td>\(esc(k.root.described))</td>"
            s += "<td>\(esc(k.signing.described))</td><td>\(k.expires.map(RFC3339.format) ?? "never")</td></tr>\n"
        }
        return s + "</table></section>\n"
    }

    /// Rows: the version a client runs (0: the bundle only); columns: each channel's release.
    static func costs(_ r: RepositoryReport) -> String {
        var s = "<section id=\"costs\"><h2>Update cost</h2>\n<p class=\"note\">Bytes a client on each version fetches to reach each channel's current release, by range requests, from the releases' file lists (files it has are not fetched; the head and the index pages that changed come on top). Marked ≤: chunked files counted whole, which chunking makes cheaper.</p>\n"
        s += "<table><tr><th>client on</th>" + r.channels.map { "<th>\(esc($0.name)) v\($0.version)</th>" }.joined() + "</tr>\n"
        for from in [0] + r.versions {
            s += "<tr><th>\(from == 0 ? "the bundle" : "version \(from)")</th>"
            for c in r.channels {
                guard let cost = r.costs.first(where: { $0.from == from && $0.channel == c.name }) else { s += "<td></td>"; continue }
                guard let bytes = cost.bytes else {
                    s += "<td class=\"muted\" data-from=\"\(from)\" data-channel=\"\(esc(c.name))\" data-bytes=\"\">current</td>"
                    continue
                }
                let share = c.archiveBytes > 0 ? min(1, Double(bytes) / Double(c.archiveBytes)) : 0
                let shade = Int(255 - share * 90)
                s += "<td class=\"num cost\" style=\"background: rgb(\(shade), \(shade + (255 - shade) / 2), 255)\" data-from=\"\(from)\" data-channel=\"\(esc(c.name))\" data-bytes=\"\(bytes)\" title=\"\(bytes) bytes, \(cost.files) files\">\(cost.upperBound ? "≤ " : "")\(formatBytes(bytes))</td>"
            }
            s += "</tr>\n"
        }
        return s + "</table></section>\n"
    }

    static func health(_ r: RepositoryReport) -> String {
        guard let policy = r.policy else { return "" }
        var s = "<section id=\"health\"><h2>Rollout health</h2>\n<p class=\"note\">Devices that reported outcome events, per rollout step (the share in force at each device's first check that took the release), against the policy: min_devices \(policy.minDevices), steps \(policy.steps.map(Rollout.format).joined(separator: ", ")). Devices that never report are not counted.</p>\n"
        for c in r.channels {
            let steps = r.health.filter { $0.channel == c.name }
            let decision = r.decisions.first { $0.channel == c.name }?.decision
            s += "<h3>\(esc(c.name)) version \(c.version)</h3>\n"
            if let d = decision {
                let cls = d.action == .halt || d.action == .halted ? "halt" : d.action == .advance ? "ok" : "muted"
                s += "<p class=\"decision\" data-channel=\"\(esc(c.name))\" data-decision=\"\(d.action.rawValue)\">gate: <span class=\"\(cls)\">\(d.action.rawValue)</span> — \(esc(d.reasons.joined(separator: "; ")))</p>\n"
            }
            guard !steps.isEmpty else { s += "<p class=\"muted\">no events for this release</p>\n"; continue }
            let names = steps[0].rates.map(\.name)
            s += "<table><tr><th>step</th><th>activated</th><th>settled</th>" + names.map { "<th>\(esc($0))</th>" }.joined() + "</tr>\n"
            for h in steps {
                let step = h.basisPoints < 0 ? "unknown" : Rollout.format(Double(h.basisPoints) / 100) + "%"
                s += "<tr class=\"step\" data-channel=\"\(esc(c.name))\" data-percent=\"\(h.basisPoints < 0 ? "" : Rollout.format(Double(h.basisPoints) / 100))\"><td>\(step)</td>"
                s += "<td class=\"num\" data-activated=\"\(h.counts.activated)\">\(h.counts.activated)</td><td class=\"num\" data-settled=\"\(h.counts.settled)\">\(h.counts.settled)</td>"
                for rate in h.rates {
                    let crossed = rate.crossed(minDevices: policy.minDevices)
                    s += "<td class=\"num\(crossed ? " crossed" : "")\" data-rate=\"\(rate.name)\" data-failures=\"\(rate.failures)\" data-devices=\"\(rate.devices)\">"
                    s += "\(RolloutGate.format(rate.rate)) <span class=\"muted\">(\(rate.failures)/\(rate.devices); max \(RolloutGate.format(rate.max)))</span></td>"
                }
                s += "</tr>\n"
            }
            s += "</table>\n"
        }
        return s + "</section>\n"
    }

    /// Text and attribute values escaped by Unicode scalar (not by character: a quote followed
    /// by a combining mark is one character, and must not pass as something else).
    static func esc(_ s: String) -> String {
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars {
            switch u {
            case "&": out.append(contentsOf: "&amp;".unicodeScalars)
            case "<": out.append(contentsOf: "&lt;".unicodeScalars)
            case ">": out.append(contentsOf: "&gt;".unicodeScalars)
            case "\"": out.append(contentsOf: "&quot;".unicodeScalars)
            case "'": out.append(contentsOf: "&#39;".unicodeScalars)
            default: out.append(u)
            }
        }
        return String(out)
    }

    static func fmt(_ v: Double) -> String {
        let tenths = Int((v * 10).rounded())
        return "\(tenths / 10).\(abs(tenths % 10))"
    }
}
