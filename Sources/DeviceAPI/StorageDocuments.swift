import Foundation
import HTTPTypes
import MidtierCore
package import MidtierHTTP
package import MidtierJSON

/// The Storage service's documents as values (docs/device-api.md, "User and device storage"):
/// the key path read from the request's segments, a write's body, and the document a GET,
/// PUT, POST, PATCH or DELETE makes of the stored one. No I/O: ``StorageRoutes`` does the
/// signing in, the store and the answers; the fuzz target `storage` drives these directly.
package enum StorageDocuments {
    /// The most segments after the level (the document name and up to 31 keys inside it), and
    /// the most bytes of one segment once percent-decoded. Checked before anything is built
    /// from the path.
    package static let maximumSegments = 32
    package static let segmentLimit = 256

    /// `segments` percent-decoded, within ``maximumSegments`` and ``segmentLimit``: counted
    /// before any is decoded, so that a path of thousands of segments costs nothing more.
    package static func keyPath(_ segments: some Collection<Substring>) throws(Refusal) -> [String] {
        guard segments.count <= maximumSegments else {
            throw .badRequest(
                "the path names \(segments.count) segments after the level; at most \(maximumSegments) (a document name and up to \(maximumSegments - 1) keys)"
            )
        }
        var keys: [String] = []
        for segment in segments {
            guard let key = segment.removingPercentEncoding else {
                throw .badRequest("the key path segment \(segment.prefix(64)) is not percent-encoded correctly")
            }
            guard key.utf8.count <= segmentLimit else {
                throw .badRequest("a document name or key is longer than \(segmentLimit) bytes")
            }
            keys.append(key)
        }
        return keys
    }

    /// A write's body: one JSON object (the strict reader: no duplicate keys, no trailing
    /// commas) that nests no deeper than the stored document may once it is set `inside` keys
    /// deep — the strict reader's ``StrictJSON/maximumDepth``, so every stored document reads
    /// back.
    package static func object(_ bytes: [UInt8], inside: Int) throws(Refusal) -> JSON {
        switch StrictJSON.value(bytes) {
        case .success(let value) where value.members != nil:
            guard inside + value.nestingDepth <= StrictJSON.maximumDepth else {
                throw .badRequest(
                    "the document would nest more than \(StrictJSON.maximumDepth) levels deep (\(inside) keys in the path and \(value.nestingDepth) levels in the body)"
                )
            }
            return value
        case .success(let value): throw .badRequest("the body is not a JSON object: it is \(value.kind)")
        case .failure(let error): throw .badRequest("the body is not a JSON object: \(error)")
        }
    }

    /// `over` with `value` laid on it: objects member by member (keys by their bytes), anything
    /// else replaced.
    package static func merging(_ value: JSON, over base: JSON) -> JSON {
        guard let members = value.members, var result = base.members else { return value }
        for member in members {
            if let index = index(of: member.key, in: result) {
                result[index].value = merging(member.value, over: result[index].value)
            } else {
                result.append(member)
            }
        }
        return .object(result)
    }

    /// RFC 7396 JSON merge patch: `patch`'s members set into `target`, `null` removing one.
    package static func mergePatch(_ target: JSON, with patch: JSON) -> JSON {
        guard let members = patch.members else { return patch }
        guard var object = target.members else { return mergePatch([:], with: patch) }
        for member in members {
            let existing = index(of: member.key, in: object)
            if member.value == .null {
                if let existing { object.remove(at: existing) }
            } else if let existing {
                object[existing].value = mergePatch(object[existing].value, with: member.value)
            } else {
                object.append(JSONMember(key: member.key, value: mergePatch(.null, with: member.value)))
            }
        }
        return .object(object)
    }

    /// A stored document (an object; nothing readable counts as empty).
    package static func document(_ text: String) -> JSON {
        guard case .success(let value) = StrictJSON.value(Array(text.utf8)), value.members != nil else { return [:] }
        return value
    }

    /// A document as stored: compact JSON, keys sorted (by their bytes) at every level.
    package static func text(_ document: JSON) -> String {
        document.sortedByKey.serialized()
    }

    /// Where the member whose key is `key` by its bytes is in `members`.
    package static func index(of key: String, in members: [JSONMember]) -> Int? {
        members.firstIndex { UserIdentity.sameBytes($0.key, key) }
    }

    /// `document` with `value` at `path`, objects made on the way.
    package static func setting(_ value: JSON, at path: ArraySlice<String>, in document: JSON, place: String) throws(Refusal) -> JSON {
        guard let key = path.first else { return value }
        guard var object = document.members else {
            throw Refusal(.conflict, code: "CONFLICT", "a value on the way to \(place) is not an object, so it cannot hold \(key)")
        }
        if let existing = index(of: key, in: object) {
            object[existing].value = try setting(value, at: path.dropFirst(), in: object[existing].value, place: place)
        } else {
            object.append(JSONMember(key: key, value: try setting(value, at: path.dropFirst(), in: [:], place: place)))
        }
        return .object(object)
    }

    /// `document` without the value at `path` (not empty).
    package static func removing(_ path: ArraySlice<String>, from document: JSON, place: String) throws(Refusal) -> JSON {
        guard let key = path.first, var object = document.members, let existing = index(of: key, in: object) else {
            throw .notFound("nothing is stored at \(place)")
        }
        if path.count == 1 {
            object.remove(at: existing)
        } else {
            object[existing].value = try removing(path.dropFirst(), from: object[existing].value, place: place)
        }
        return .object(object)
    }

    /// The value at `keyPath` in `document` (keys by their bytes), nil when a key is missing or
    /// a step is not an object.
    package static func storedValue(at keyPath: [String], in document: JSON) -> JSON? {
        var current = document
        for key in keyPath {
            guard let members = current.members, let found = index(of: key, in: members) else { return nil }
            current = members[found].value
        }
        return current
    }
}
