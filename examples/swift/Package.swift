// swift-tools-version:6.0
// A Swift program that updates its resources with assetpatch: the repository as a package
// dependency (by path here; by URL in an app), `import AssetPatchKit`.
import PackageDescription

let package = Package(
    name: "UpdateDemo",
    dependencies: [
        .package(name: "assetpatch", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "UpdateDemo",
            dependencies: [.product(name: "AssetPatchKit", package: "assetpatch")]
        ),
    ]
)
