internal import CAssetPatchABI

/// The library's version. The numbers are read from `include/assetpatch.h`, the one place the
/// version is written; CMake reads the same header, and a test checks the Python package's copy.
public enum AssetPatchVersion {
    public static let major = Int(ASSETPATCH_VERSION_MAJOR)
    public static let minor = Int(ASSETPATCH_VERSION_MINOR)
    public static let patch = Int(ASSETPATCH_VERSION_PATCH)
    public static let string = "\(major).\(minor).\(patch)"
}
