// Updates from a release repository with a progress line, then resolves resources.
//   UpdateDemo DATA_DIR BUNDLE_DIR MANIFEST_URL [PUBLIC_KEY] [NAME...]
import AssetPatchKit
#if canImport(Glibc)
import Glibc
#endif

func run(_ args: [String]) async throws(AssetPatchError) {
    let key = args.count > 4 && !args[4].isEmpty ? [args[4]] : nil
    let client = try AssetPatchClient(dataDirectory: args[1], bundleDirectory: args[2],
                                      options: .init(manifestURL: args[3], publicKeys: key, variants: ["@3x", "@2x", ""]))
    print("serving version \(client.currentVersion)")
    let installed = try await client.update { p in
        let percent = p.fraction.map { " \(Int($0 * 100))%" } ?? ""
        print("  \(p.phase) \(p.bytesDone)/\(p.bytesTotal) bytes\(percent)")
    }
    print(installed ? "installed version \(client.currentVersion)" : "already current (version \(client.currentVersion))")
    for name in args.count > 5 ? Array(args[5...]) : ["readme.txt"] {
        let (path, variant) = try client.resolveVariant(name)
        print("\(name) -> \(path) (variant \(variant))")
    }
}

let args = CommandLine.arguments
guard args.count >= 4 else {
    print("usage: UpdateDemo DATA_DIR BUNDLE_DIR MANIFEST_URL [PUBLIC_KEY] [NAME...]")
    exit(2)
}
do {
    try await run(args)
} catch {
    print("update failed: \(error)")
    exit(1)
}
