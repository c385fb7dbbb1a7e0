import Glibc

/// What a request asks of the server's representation.
package enum ContentCodings: Sendable {
    /// `Accept-Encoding: identity`, and no decoding by libcurl: the body's bytes arrive as sent,
    /// so that a caller resuming with ranges sees exactly which representation it gets.
    case identity
    /// Every coding libcurl can decode is offered, and libcurl decodes the body.
    case decoded
}

/// Decodes a response body sent with a gzip or deflate Content-Encoding (RFC 9110 section
/// 8.4.1), for requests that take the bytes as sent (`ContentCodings.identity`).
final class ContentDecoder {
    /// The response's content coding, nil for identity. Throws for codings this decoder lacks.
    static func coding(of head: ResponseHead, _ what: String) throws -> String? {
        guard let value = head.header("Content-Encoding") else { return nil }
        let codings = value.lowercased().split(separator: ",").map { String($0).trimmingCharacters(in: " \t") }.filter { $0 != "identity" && !$0.isEmpty }
        if codings.isEmpty { return nil }
        guard codings.count == 1, ["gzip", "x-gzip", "deflate"].contains(codings[0]) else {
            throw AssetPatchError(.http, "\(what): unsupported Content-Encoding \"\(value)\"")
        }
        return codings[0]
    }

    private let inflater: Inflater
    var ended: Bool { inflater.ended }
    let what: String

    init(coding: String, what: String) throws {
        self.what = what
        inflater = try Inflater(.zlibOrGzip)
    }

    /// Feeds encoded bytes, passing what they decode to `sink`.
    func decode(_ chunk: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        do { try inflater.push(chunk, sink) } catch let f as InflateFailure {
            switch f {
            case let .corrupt(m): throw AssetPatchError(.http, "\(what): the encoded body does not decode (\(m))")
            case .trailing, .overrun: throw AssetPatchError(.http, "\(what): data after the end of the encoded body")
            case .short: throw AssetPatchError(.http, "\(what): the encoded body ended early")
            }
        }
    }
}
