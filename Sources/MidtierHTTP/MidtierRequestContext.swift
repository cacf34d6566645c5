import Hummingbird
import NIOCore

/// Per-request context: Hummingbird's core storage plus the client's address (for
/// throttling, `X-Forwarded-For` and the audit trail).
public struct MidtierRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// The client's IP address as text, without the port: the connection's peer, or, behind a
    /// trusted proxy, the address it forwarded (set by the responders from `trustedProxies`).
    public var clientIP: String?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.clientIP = remoteAddress?.ipAddress
    }

    /// Registration bodies are small; the proxy streams and never collects.
    public var maxUploadSize: Int { 64 * 1024 }
}
