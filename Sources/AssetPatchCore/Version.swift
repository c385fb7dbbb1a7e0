/// The library's version; `include/assetpatch.h` carries the same numbers.
public enum AssetPatchVersion {
    public static let major = 0
    public static let minor = 1
    public static let patch = 0
    public static let string = "0.1.0"
}
