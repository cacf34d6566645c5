import Callers
import DeviceAPI
import Foundation
import MidtierJSON
import Registrations
import SAMLSigning

/// `atom`: a registration body in Atom/XML, read as the registration routes read it
/// (its properties and inline Capability feed, then the same field checks a JSON body gets).
enum AtomTarget {
    static func run(_ bytes: [UInt8]) {
        guard case .success(let object) = DeviceFields.fields(ofAtom: bytes) else { return }
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

/// `storage`: a Storage service write as the routes make it (``StorageDocuments``). The input is
/// a request target's key path, a line feed, a stored document, a line feed and a body: the path
/// is split at `/` and read with its limits, the body checked for its nesting under the path,
/// then set, merged (PATCH) and removed in the stored document, and every result written and
/// read back as the store would.
enum StorageTarget {
    static func run(_ bytes: [UInt8]) {
        let parts = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 2, omittingEmptySubsequences: false)
        let path = String(decoding: parts.first ?? [], as: UTF8.self)
        guard let keys = try? StorageDocuments.keyPath(path.split(separator: "/", omittingEmptySubsequences: false)) else { return }
        let stored = parts.count > 1 ? StorageDocuments.document(String(decoding: parts[1], as: UTF8.self)) : [:]
        let inside = Array(keys.dropFirst())
        guard parts.count > 2, let body = try? StorageDocuments.object(Array(parts[2]), inside: inside.count) else { return }
        for document in [
            try? StorageDocuments.setting(body, at: inside[...], in: stored, place: path),
            try? StorageDocuments.setting(
                StorageDocuments.mergePatch(StorageDocuments.storedValue(at: inside, in: stored) ?? .null, with: body),
                at: inside[...], in: stored, place: path),
            inside.isEmpty ? nil : try? StorageDocuments.removing(inside[...], from: stored, place: path),
        ] {
            guard let document else { continue }
            let text = StorageDocuments.text(document)
            // What was written reads back (the nesting bound keeps it within the reader's).
            _ = StorageDocuments.document(text)
            _ = StorageDocuments.merging(document, over: stored)
        }
    }
}
