import Foundation

/// An IP address or a block of them in CIDR notation (`10.0.0.5`, `10.0.1.0/24`, `fd00::/8`),
/// as `trustedProxies` lists them (docs/configuration.md). Addresses are parsed by the C
/// library's `inet_pton`.
package struct AddressRange: Sendable, Equatable, CustomStringConvertible {
    /// The network's bytes: 4 (IPv4) or 16 (IPv6), host bits cleared.
    let network: [UInt8]
    let prefixLength: Int

    /// nil for anything but an address with an optional `/prefix` that fits its family.
    package init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = Self.bytes(of: String(parts[0])) else { return nil }
        var prefix = address.count * 8
        if parts.count == 2 {
            guard let given = Int(parts[1]), (0...prefix).contains(given), parts[1].allSatisfy(\.isASCII) else { return nil }
            prefix = given
        }
        self.prefixLength = prefix
        self.network = Self.masked(address, prefix)
    }

    /// Whether `address` (4 or 16 bytes, from `bytes(of:)`) lies in this range.
    package func contains(_ address: [UInt8]) -> Bool {
        address.count == network.count && Self.masked(address, prefixLength) == network
    }

    /// The bytes of an IPv4 or IPv6 address in text form; nil for anything else. An
    /// IPv4-mapped IPv6 address (`::ffff:10.0.0.5`, how a dual-stack listener sees an IPv4
    /// peer) is its IPv4 address.
    package static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        return bytes.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) ? Array(bytes.suffix(4)) : bytes
    }

    /// The address of an `X-Forwarded-For` entry: as is, or without the port some proxies
    /// add (`203.0.113.9:41234`, `[2001:db8::7]:41234`); nil when it is not an address.
    static func forwardedAddress(_ entry: String) -> String? {
        if bytes(of: entry) != nil { return entry }
        if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
            let inner = String(entry[entry.index(after: entry.startIndex)..<close])
            return bytes(of: inner) != nil && (entry[close...] == "]" || entry[entry.index(after: close)...].first == ":") ? inner : nil
        }
        if let colon = entry.lastIndex(of: ":"), entry.firstIndex(of: ":") == colon {
            let host = String(entry[..<colon])
            return bytes(of: host) != nil ? host : nil
        }
        return nil
    }

    static func masked(_ address: [UInt8], _ prefix: Int) -> [UInt8] {
        address.enumerated().map { index, byte in
            let bits = min(max(prefix - index * 8, 0), 8)
            return bits == 8 ? byte : byte & ~(UInt8(0xFF) >> bits)
        }
    }

    package var description: String {
        let family = network.count == 4 ? AF_INET : AF_INET6
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let address = network.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        let shown = address == nil ? "?" : String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return prefixLength == network.count * 8 ? shown : "\(shown)/\(prefixLength)"
    }
}

extension Array where Element == AddressRange {
    /// Whether `peer` (an address in text form) is in one of the ranges.
    package func includes(_ peer: String?) -> Bool {
        guard !isEmpty, let peer, let bytes = AddressRange.bytes(of: peer) else { return false }
        return contains { $0.contains(bytes) }
    }

    /// The client a request comes from (docs/operations.md, "Behind a load balancer"): the
    /// connection's peer, unless the peer is a trusted proxy; then the rightmost address in
    /// `X-Forwarded-For` that is not a trusted proxy, reading from the right (each proxy appends
    /// the address it was called from, so only the addresses right of the first untrusted one
    /// can be believed). A malformed entry ends the walk at the last address believed.
    package func client(peer: String?, forwardedFor: [Substring]) -> String? {
        guard !isEmpty, let peer, let bytes = AddressRange.bytes(of: peer), contains(where: { $0.contains(bytes) }) else { return peer }
        var believed = peer
        for header in forwardedFor.reversed() {
            for entry in header.split(separator: ",").reversed() {
                guard let candidate = AddressRange.forwardedAddress(entry.trimmingCharacters(in: .whitespaces)),
                    let bytes = AddressRange.bytes(of: candidate)
                else { return believed }
                believed = candidate
                if !contains(where: { $0.contains(bytes) }) { return candidate }
            }
        }
        return believed
    }
}
