import Forwarding

/// `proxy-path`: a device's request path split into destination and remainder (ProxyPath), and
/// the remainder's check before it is forwarded, as the proxy handler calls them.
enum ProxyPathTarget {
    static func run(_ bytes: [UInt8]) {
        let rawPath = String(decoding: bytes, as: UTF8.self)
        guard let path = ProxyPath(rawPath: rawPath) else { return }
        _ = String(path.destination)
        _ = ProxyPath.problem(in: path.remainder)
    }
}
