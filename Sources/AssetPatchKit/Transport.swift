internal import AssetPatchCore

/// Where a transport of the host's own reports one response (see ``AssetPatchClient/setTransport(_:)``).
public struct TransportResponse: @unchecked Sendable {  // used on the request's thread only
    let response: HostResponse

    /// The final response's status, header lines ("Name: value") and the URL that answered after
    /// redirects (nil: the one asked for). false: the library refuses it; stop.
    public func head(status: Int, headers: [String], finalURL: String? = nil) -> Bool {
        response.head(status: status, lines: headers, finalURL: finalURL)
    }

    /// The next body bytes, as received. May block while the client is paused or capped.
    /// false: stop (cancelled, refused).
    public func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        response.body(bytes)
    }
}

extension AssetPatchClient {
    /// Makes `perform(method, url, headers, response)` do every later request of this client in
    /// place of libcurl (nil: libcurl again): it reports the response through `response` before
    /// returning, and returns false when the transfer failed (retried like a network failure).
    /// Ranges, resume, verification, validators, retries, the cap and pauses work over it.
    public func setTransport(_ perform: (@Sendable (String, String, [String], TransportResponse) -> Bool)?) throws(AssetPatchError) {
        let c = try open()
        c.setTransport(perform.map { fn in
            HostTransport { method, url, headers, response in fn(method, url, headers, TransportResponse(response: response)) ? 0 : 1 }
        })
    }
}
