import AssetPatchCore
import ArgumentParser
import Glibc

/// The groups of the active release, their state and sizes.
struct GroupsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "groups",
                                                    abstract: "List the active release's groups: state, delivery, pin, files and sizes.")
    @OptionGroup var client: ClientOptions
    @Flag(name: .long, help: "Print them as JSON.") var json = false

    func run() throws {
        try client.with { c in
            let groups = try c.groupNames.map { try c.groupStatus($0) }
            if json {
                print(JSON.array(groups.map(GroupsCommand.json)).serialized(indent: 2))
                return
            }
            if groups.isEmpty { print("no groups in \(c.currentVersion == 0 ? "the bundle" : "version \(c.currentVersion)")") }
            for g in groups {
                print("\(g.name.padding(20)) \(GroupsCommand.stateName(g.state).padding(8)) \(g.delivery.name.padding(10)) \(g.pinned ? "pinned " : "")\(g.files) files, \(g.totalBytes) bytes (\(g.archiveBytes) in the archive\(g.state == .local ? "" : ", \(g.fetchBytes) to fetch"))")
            }
        }
    }

    static func stateName(_ s: GroupStatus.State) -> String {
        switch s {
        case .absent: "absent"
        case .partial: "partial"
        case .local: "local"
        }
    }

    static func json(_ g: GroupStatus) -> JSON {
        .object([("name", .string(g.name)), ("state", .string(stateName(g.state))), ("delivery", .string(g.delivery.name)),
                 ("pinned", .bool(g.pinned)), ("files", .int(Int64(g.files))), ("bytes", .int(Int64(g.totalBytes))),
                 ("local_bytes", .int(Int64(g.localBytes))), ("archive_bytes", .int(Int64(g.archiveBytes))),
                 ("fetch_bytes", .int(Int64(g.fetchBytes)))])
    }
}

/// Fetch, evict, pin and unpin groups of the active release.
struct GroupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "group", abstract: "Fetch, evict, pin or unpin groups of the active release.",
                                                    subcommands: [Fetch.self, Evict.self, Pin.self, Unpin.self])

    struct Fetch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch on-demand groups from the active release's own archive (resumable; files and chunks on disk are not fetched again).")
        @OptionGroup var client: ClientOptions
        @Option(name: .customLong("quota"), help: "group_quota_bytes: evict unpinned groups, least recently used first, to stay within it.")
        var quota: UInt64?
        @Option(name: .long, help: "Comma-separated groups wanted with every update: never evicted for the quota.") var groups: String?
        @OptionGroup var transfer: TransferOptions
        @Argument(help: "Group names.") var names: [String]

        func run() throws {
            try client.with { c in
                if let quota { try c.set("group_quota_bytes", String(quota)) }
                if let groups { try c.set("groups", groups) }
                let signals = try transfer.configure(c, priorityOption: "fetch_priority")
                defer { signals.forEach { $0.cancel() } }
                let printer = ProgressPrinter()
                let moved = try c.fetchGroups(names) { printer.show($0) }
                print("fetched \(names.joined(separator: ", ")): \(moved) bytes transferred")
            }
        }
    }

    struct Evict: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Evict on-demand groups (their files go once no client serves them).")
        @OptionGroup var client: ClientOptions
        @Argument(help: "Group names.") var names: [String]

        func run() throws {
            try client.with { c in
                for n in names { try c.evictGroup(n) }
                print("evicted \(names.joined(separator: ", "))")
            }
        }
    }

    struct Pin: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pin groups: never evicted to make room under the quota.")
        @OptionGroup var client: ClientOptions
        @Argument(help: "Group names.") var names: [String]

        func run() throws {
            try client.with { c in for n in names { try c.pinGroup(n, true) } }
        }
    }

    struct Unpin: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Unpin groups.")
        @OptionGroup var client: ClientOptions
        @Argument(help: "Group names.") var names: [String]

        func run() throws {
            try client.with { c in for n in names { try c.pinGroup(n, false) } }
        }
    }
}

/// The active release's groups as the state records them (for `status`: no client opened).
func activeGroups(_ store: Store, _ s: StoreState) -> [(group: ReleaseGroup, local: Bool, pinned: Bool)] {
    guard let active = s.active, let record = try? store.loadRelease(active.id) else { return [] }
    return record.groups.map { g in
        (g, g.delivery == .install || s.groups.isLocal(g.name, in: active.id), s.groups.pinned.contains(g.name))
    }
}
