import MidtierCore
import NIOCore
import Synchronization

/// The connections open on one listener per client address, for `maxConnectionsPerAddress`
/// (docs/operations.md, "Slow and idle clients"). An IPv4 address counts alone, an IPv6 address
/// with its /64 (one subscriber's network); the socket's peer is what counts, not
/// `X-Forwarded-For`.
package final class ConnectionsPerAddress: Sendable {
    private let counts = Mutex<[[UInt8]: Int]>([:])

    package init() {}

    /// Counts a connection from `key`, unless `key` holds `limit` connections already; whether
    /// it was counted.
    package func open(_ key: [UInt8], limit: Int) -> Bool {
        counts.withLock { counts in
            let open = counts[key, default: 0]
            guard open < limit else { return false }
            counts[key] = open + 1
            return true
        }
    }

    /// A counted connection from `key` has closed.
    package func close(_ key: [UInt8]) {
        counts.withLock { counts in
            guard let open = counts[key] else { return }
            counts[key] = open > 1 ? open - 1 : nil
        }
    }

    /// How many connections `key` holds open.
    package func count(_ key: [UInt8]) -> Int { counts.withLock { $0[key, default: 0] } }

    /// What a peer's connections are counted under: the 4 bytes of an IPv4 address (from
    /// `AddressRange.bytes(of:)`, where an IPv4-mapped IPv6 address is its IPv4 address), the
    /// first 8 bytes (the /64) of an IPv6 address.
    package static func key(of address: [UInt8]) -> [UInt8] {
        address.count == 16 ? Array(address.prefix(8)) : address
    }
}

extension SocketAddress {
    /// The bytes of this address's IP (4 or 16; an IPv4-mapped IPv6 address gives its 4), as
    /// `AddressRange` reads them; nil for a Unix socket.
    package var ipBytes: [UInt8]? { ipAddress.flatMap(AddressRange.bytes(of:)) }
}
