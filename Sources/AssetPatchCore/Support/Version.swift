internal import CAssetPatchABI

/// The library's version. The numbers are read from `include/assetpatch.h`, the one place the
/// version is written; CMake reads the same header, and a test checks the Python package's copy.
package enum AssetPatchVersion {
    package static let major = Int(ASSETPATCH_VERSION_MAJOR)
    package static let minor = Int(ASSETPATCH_VERSION_MINOR)
    package static let patch = Int(ASSETPATCH_VERSION_PATCH)
    package static let string = "\(major).\(minor).\(patch)"
}
