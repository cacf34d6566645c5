package import Hummingbird
package import NIOCore

/// Per-request context: Hummingbird's core storage plus the client's address (for
/// throttling, `X-Forwarded-For` and the audit trail).
package struct MidtierRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    package let remoteAddress: SocketAddress?
    /// The client's IP address as text, without the port: the connection's peer, or, behind a
    /// trusted proxy, the address it forwarded (set by the responders from `trustedProxies`).
    package var clientIP: String?

    package init(source: ApplicationRequestContextSource) {
        self.init(source: source, peer: Self.peer(of: source.channel))
    }

    /// A context for a request on a connection whose ``peer(of:)`` is known already (worked out
    /// once per connection rather than once per request).
    package init(source: ApplicationRequestContextSource, peer: Peer) {
        self.coreContext = .init(source: source)
        self.remoteAddress = peer.address
        self.clientIP = peer.ip
    }

    /// A connection's peer: its address, and the IP address as text.
    package typealias Peer = (address: SocketAddress?, ip: String?)

    package static func peer(of channel: any Channel) -> Peer {
        let address = channel.remoteAddress
        return (address, address?.ipAddress)
    }

    /// Registration bodies are small; the proxy streams and never collects.
    package var maxUploadSize: Int { 64 * 1024 }
}
