// swift-tools-version:6.0
import PackageDescription

// libassetpatch.so carries the Swift runtime inside it (-static-stdlib), exports only the
// assetpatch_* C functions (version script) and is versioned like any C library (SONAME).
let sharedLibraryLinkerFlags: [String] = [
    "-static-stdlib",
    "-use-ld=lld",
    "-Xlinker", "--version-script=Sources/AssetPatch/assetpatch.map",
    "-Xlinker", "-soname=libassetpatch.so.1",
    // No "-z defs" here (CMake's build has it): sanitizer runtimes resolve from the test binary.
]

let package = Package(
    name: "assetpatch",
    products: [
        .library(name: "assetpatch", type: .dynamic, targets: ["AssetPatch"]),
        // The Swift API: `import AssetPatchKit` (docs/swift.md).
        .library(name: "AssetPatchKit", targets: ["AssetPatchKit"]),
        .executable(name: "assetpatch-cli", targets: ["assetpatch-cli"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSystem"),
        // The public header, imported so the C ABI layer uses its exact types.
        .systemLibrary(name: "CAssetPatchABI"),
        .target(
            name: "AssetPatchCore",
            dependencies: ["CCurl", "CZlib", "CCrypto", "CSystem", "CAssetPatchABI"]
        ),
        .target(
            name: "AssetPatch",
            dependencies: ["AssetPatchCore", "CAssetPatchABI"],
            exclude: ["assetpatch.map", "hot-symbols.txt", "layout.ld"],
            linkerSettings: [.unsafeFlags(sharedLibraryLinkerFlags)]
        ),
        .target(
            name: "AssetPatchKit",
            dependencies: ["AssetPatchCore"]
        ),
        .executableTarget(
            name: "assetpatch-cli",
            dependencies: [
                "AssetPatchCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "AssetPatchCoreTests",
            dependencies: ["AssetPatchCore", "CZlib"],
            exclude: ["vectors"]
        ),
        .testTarget(
            name: "AssetPatchKitTests",
            dependencies: ["AssetPatchKit", "AssetPatchCore"]
        ),
    ]
)
