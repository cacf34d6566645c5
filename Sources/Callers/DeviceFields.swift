import HTTPTypes
package import MidtierCore
package import MidtierHTTP
package import MidtierJSON
package import Registrations

/// The device fields of a registration (SAP's Connection entity, docs/device-api.md,
/// "Onboarding"), read one way whether they come in a Connections body or an implicit
/// registration, and the answer while a device is held by a lock or a wipe.
package enum DeviceFields {
    /// The one reading of the device fields, whichever format they came in.
    package static func read(_ object: [String: JSON], existing: DeviceDetails) throws(Refusal) -> DeviceDetails {
        var device = existing
        let fields: [(String, WritableKeyPath<DeviceDetails, String>)] = [
            ("DeviceType", \.deviceType), ("DeviceModel", \.deviceModel), ("DeviceId", \.deviceId), ("FormFactor", \.formFactor),
            ("ApnsDeviceToken", \.apnsDeviceToken), ("AndroidGcmRegistrationId", \.androidGcmRegistrationId),
        ]
        for (name, keyPath) in fields {
            switch object[name] {
            case nil, .null?:
                continue
            case .string(let text)?:
                try checkStoredText(text, name)
                device[keyPath: keyPath] = text
            default:
                throw .badRequest("\(name) must be a string")
            }
        }
        for (name, isBoolean) in detailFields {
            switch object[name] {
            case nil, .null?:
                continue
            case .bool(let value)? where isBoolean:
                device.details[name] = String(value)
            case .string(let text)? where isBoolean && ["true", "false"].contains(text.lowercased()):
                device.details[name] = text.lowercased()
            case .string(let text)? where !isBoolean:
                try checkStoredText(text, name)
                device.details[name] = text
            default:
                throw .badRequest(isBoolean ? "\(name) must be true or false" : "\(name) must be a string")
            }
        }
        if let given = object[capabilityNavigation], given != .null {
            let list = try capabilities(given)
            device.details[capabilitiesDetail] = list.isEmpty ? nil : JSON.array(list.map(\.stored)).serialized()
        }
        return device
    }

    // MARK: Capabilities

    /// The navigation property SAP's registration carries a device's capabilities in
    /// (help.sap.com, "Create Capabilities Upon Registration"; docs/push.md, "Capabilities").
    package static let capabilityNavigation = "Capability"
    /// The detail a registration keeps its capabilities in: a JSON array of
    /// `{"Category", "CapabilityName"}`; absent when the device named none.
    package static let capabilitiesDetail = "Capabilities"
    /// At most this many capabilities on one registration.
    package static let maximumCapabilities = 64

    /// One capability a device registered: a category (`push`, in SAP's example) and a name.
    package struct Capability: Sendable, Equatable {
        package var category: String
        package var name: String

        var stored: JSON { .sortedObject(["Category": .string(category), "CapabilityName": .string(name)]) }
    }

    /// The capabilities of a Connections body: a list of `{"Category", "CapabilityName"}`, or
    /// OData v2 JSON's `{"results": [...]}` around it; the Atom body's inline feed comes here
    /// as the same list. Replaces what the registration had; an empty list clears it.
    static func capabilities(_ given: JSON) throws(Refusal) -> [Capability] {
        var list = given
        if let results = given["results"], given.members != nil { list = results }
        guard case .array(let entries) = list else {
            throw .badRequest("Capability must be a list of {\"Category\", \"CapabilityName\"} (or {\"results\": [...]})")
        }
        guard entries.count <= maximumCapabilities else {
            throw .badRequest("Capability names \(entries.count) capabilities; at most \(maximumCapabilities)")
        }
        var found: [Capability] = []
        for (index, entry) in entries.enumerated() {
            guard entry.members != nil, case .string(let name)? = entry["CapabilityName"], !name.isEmpty else {
                throw .badRequest("Capability[\(index)] must be an object with a CapabilityName (a non-empty string)")
            }
            let category: String
            switch entry["Category"] {
            case nil, .null?: category = ""
            case .string(let text)?: category = text
            default: throw .badRequest("Capability[\(index)].Category must be a string")
            }
            for (text, member) in [(name, "CapabilityName"), (category, "Category")] {
                guard text.utf8.count <= 256, !StoredText.hasControlCharacters(text) else {
                    throw .badRequest("Capability[\(index)].\(member) must be at most 256 bytes without control characters")
                }
            }
            let capability = Capability(category: category, name: name)
            // Kept and matched by their bytes: `é` and `e` + `◌́` are two capabilities.
            if !found.contains(where: { UserIdentity.sameBytes($0.category, category) && UserIdentity.sameBytes($0.name, name) }) {
                found.append(capability)
            }
        }
        return found
    }

    /// The capabilities a registration keeps (``capabilitiesDetail``).
    package static func capabilities(of registration: Registration) -> [Capability] {
        guard let text = registration.details[capabilitiesDetail], case .success(let value) = StrictJSON.value(Array(text.utf8)),
            case .array(let entries) = value
        else { return [] }
        return entries.compactMap { entry in
            guard case .string(let name)? = entry["CapabilityName"] else { return nil }
            return Capability(category: entry["Category"]?.stringValue ?? "", name: name)
        }
    }

    /// A device's text field as the store keeps it: at most 4096 bytes, no control characters
    /// (docs/identity.md, "Stored text").
    private static func checkStoredText(_ text: String, _ name: String) throws(Refusal) {
        guard text.utf8.count <= 4096 else { throw .badRequest("\(name) is longer than 4096 bytes") }
        guard !StoredText.hasControlCharacters(text) else { throw .badRequest("\(name) contains control characters") }
    }

    /// The Connection entity's other writable fields SAP's registration `$metadata` has, and
    /// whether each is a boolean (else a string). Kept in `Registration.details`.
    package static let detailFields: [(name: String, isBoolean: Bool)] = [
        ("DeviceSubType", false), ("ApnsPushEnable", true), ("AndroidGcmPushEnabled", true), ("WnsChannelURI", false),
        ("PushGroup", false), ("UserLocale", false), ("TimeZone", false), ("Email", false),
        ("CustomCustom1", false), ("CustomCustom2", false), ("CustomCustom3", false), ("CustomCustom4", false),
        ("ApplicationVersion", false),
    ]

    /// The refusal while the user's registration `held` of a device is locked or wiped
    /// (docs/identity.md, "The same device"): the proxy's answer for that state, and what the
    /// device cannot do until an admin acts.
    package static func held(_ held: Registration, _ consequence: String) -> Refusal {
        switch held.state {
        case .wiped:
            .forbidden("registration \(held.id) of this device is wiped: \(consequence) unless an admin deletes it", messageCode: "TRAFFIC_REG_WIPED")
        case .locked, .active:
            .forbidden(
                "registration \(held.id) of this device is locked: \(consequence) until an admin unlocks it", messageCode: "TRAFFIC_REG_LOCKED")
        }
    }

    /// The refusal when a push token the device names is held by another user's registration of
    /// the app (docs/push.md, "Registering a device"): it moves only between one user's own
    /// registrations, else the phone's notifications would go to whoever named its token.
    package static let tokenHeldByAnotherUser = Refusal(
        .conflict, code: "CONFLICT",
        "the push token is held by another user's registration of this app; it moves only between one user's own registrations")

    /// The refusal when the user already holds `limit` registrations (`maxRegistrationsPerUser`),
    /// for a Connections POST and an implicit registration alike.
    package static func overLimit(_ limit: Int) -> Refusal {
        Refusal(
            .forbidden, code: "REGISTRATION_LIMIT",
            "the user already has \(limit) registrations, the most allowed (maxRegistrationsPerUser); delete one first")
    }
}
