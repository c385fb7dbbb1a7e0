/// Release channels: one repository, several manifests sharing `archives/`.
///
/// The default channel's manifest is the repository's `manifest.json` (and `head.json`); every
/// other channel NAME lives in `channels/NAME/`. A manifest names its channel (`"channel"`;
/// absent means the default), so a client can tell a move between channels from a replay
/// within one, and a host that names the channel it follows (option `channel`) refuses a
/// manifest of another.
package enum Channel {
    /// The name of the channel whose manifest is the repository's top-level one.
    package static let defaultName = "stable"

    /// The longest name: the C ABI's `channel` fields hold it with its NUL (`char[64]`).
    package static let maxLength = 63

    /// 1 to 63 bytes of ASCII letters, digits, '.', '_' and '-', starting with a letter or digit:
    /// it is a directory name on the host and in URLs.
    package static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...maxLength).contains(bytes.count), isAlphanumeric(bytes[0]) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    private static func isAlphanumeric(_ b: UInt8) -> Bool {
        (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122)
    }

    /// The channel's directory relative to the repository ("" for the default channel).
    package static func directory(_ name: String) -> String {
        name == defaultName ? "" : "channels/\(name)/"
    }

    /// How a URL relative to the repository's root is written in a channel's manifest.
    package static func relativeToChannel(_ name: String, _ rootRelative: String) -> String {
        name == defaultName ? rootRelative : "../../" + rootRelative
    }
}
