import DeviceAPI
import DeviceProxy
import Foundation
import MidtierJSON
import Registrations
import SAMLSigning

/// `atom`: a registration body in Atom/XML, read as the registration routes read it
/// (ODataAtomEntry's properties, then the same field checks a JSON body gets).
enum AtomTarget {
    static func run(_ bytes: [UInt8]) {
        guard case .success(let properties) = ODataAtomEntry.properties(of: bytes) else { return }
        let object = Dictionary(properties.map { ($0.name, JSON.string($0.value)) }, uniquingKeysWith: { first, _ in first })
        _ = try? DeviceFields.read(object, existing: DeviceDetails())
    }
}

/// `discovery`: the Discovery Service's function call path segment
/// (`getApplicationConfiguration(AppConfigID='…',EmailAddress='…')`), percent-decoded first as
/// the route does.
enum DiscoveryTarget {
    static func run(_ bytes: [UInt8]) {
        let segment = String(decoding: bytes, as: UTF8.self)
        _ = try? DiscoveryServiceCall.parse(segment.removingPercentEncoding ?? segment)
    }
}
