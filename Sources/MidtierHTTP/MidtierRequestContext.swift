import Hummingbird
import NIOCore

/// Per-request context: Hummingbird's core storage plus the peer address (for
/// `X-Forwarded-For` and the audit trail).
public struct MidtierRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// The peer's IP address as text, without the port.
    public var clientIP: String? { remoteAddress?.ipAddress }

    /// Registration bodies are small; the proxy streams and never collects.
    public var maxUploadSize: Int { 64 * 1024 }
}
