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
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.clientIP = remoteAddress?.ipAddress
    }

    /// Registration bodies are small; the proxy streams and never collects.
    package var maxUploadSize: Int { 64 * 1024 }
}
