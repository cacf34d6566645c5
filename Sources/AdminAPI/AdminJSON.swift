import Administration
import Foundation
import HTTPTypes
import MidtierCore
import MidtierJSON
import MidtierStore

// The JSON shapes of the admin API's answers (`docs/admin-api.yaml`, its `components`), one
// type each, written by the core's writer (`Response.json`). Members are written in key order
// (by their bytes), so that an answer's text never depends on a dictionary's order. The
// client-upload shapes are in ClientUploadJSON.swift.

/// Times as the admin API writes them: RFC 3339 in UTC, to the second (``ISO8601Time``).
enum AdminTime {
    static func json(_ milliseconds: Int64) -> JSON { .string(ISO8601Time.format(milliseconds: milliseconds)) }
}

/// `Registration`: one device registration.
struct RegistrationJSON {
    var registration: Registration

    init(_ registration: Registration) { self.registration = registration }

    var json: JSON {
        let r = registration
        return [
            "appId": .string(r.appId),
            "createdAt": AdminTime.json(r.createdAt),
            "deviceId": .string(r.deviceId),
            "deviceModel": .string(r.deviceModel),
            "deviceType": .string(r.deviceType),
            "formFactor": .string(r.formFactor),
            "id": .string(r.id),
            "lastContactAt": AdminTime.json(r.lastContactAt),
            "realm": .string(r.user.realm),
            "state": .string(r.state.rawValue),
            "userId": .string(r.user.id),
        ]
    }
}

/// `Block`: a user's block, or `null` when the user is not blocked.
struct BlockJSON {
    var block: UserBlock?

    init(_ block: UserBlock?) { self.block = block }

    var json: JSON {
        .optional(block) { b in
            ["by": .string(b.by), "reason": .string(b.reason), "since": AdminTime.json(b.since), "type": .string(b.kind.rawValue)]
        }
    }
}

/// `User`: what Midtier holds about a user — the block, the registrations and the Storage
/// service documents (sizes only, never their content; docs/device-api.md, "User and device
/// storage").
struct UserJSON {
    var record: Administration.UserRecord
    var storage: [StorageEntry]

    var json: JSON {
        [
            "block": BlockJSON(record.block).json,
            "known": .bool(record.known),
            "realm": .string(record.user.realm),
            "registrations": .array(record.registrations.map { RegistrationJSON($0).json }),
            "storage": .array(storage.map { StorageEntryJSON($0).json }),
            "userId": .string(record.user.id),
        ]
    }
}

/// One Storage service document of a user: `registration` is `null` for the user level.
struct StorageEntryJSON {
    var entry: StorageEntry

    init(_ entry: StorageEntry) { self.entry = entry }

    var json: JSON {
        [
            "appId": .string(entry.key.app),
            "name": .string(entry.key.name),
            "registration": entry.key.level.registration.map(JSON.string) ?? .null,
            "size": .number(entry.size),
            "updatedAt": AdminTime.json(entry.updatedAt),
        ]
    }
}

/// The answer to `PUT /admin/v1/users/{userId}/block`.
struct BlockOutcomeJSON {
    var user: UserIdentity
    var outcome: Administration.BlockOutcome

    var json: JSON {
        ["block": BlockJSON(outcome.block).json, "realm": .string(user.realm), "seen": .bool(outcome.seen), "userId": .string(user.id)]
    }
}

/// `AuditEntry`: one line of the audit log.
struct AuditEntryJSON {
    var entry: AuditEntry

    init(_ entry: AuditEntry) { self.entry = entry }

    var json: JSON {
        let e = entry
        return [
            "action": .string(e.action),
            "actor": .string(e.actor),
            "at": AdminTime.json(e.at),
            "detail": .string(e.detail),
            "sequence": .number(e.sequence),
            "source": .string(e.source),
            "target": .string(e.target),
        ]
    }
}

/// `Destination`: a destination without secrets (`Administration.DestinationSummary`); the
/// members a destination's authentication does not have are left out.
struct DestinationJSON {
    var summary: Administration.DestinationSummary

    init(_ summary: Administration.DestinationSummary) { self.summary = summary }

    var json: JSON {
        let d = summary
        let members: [String: JSON?] = [
            "audience": d.audience.map(JSON.string),
            "certificateValidityMinutes": d.certificateValidityMinutes.map { JSON.number($0) },
            "principalPropagationMode": d.principalPropagationMode.map(JSON.string),
            "subjectPattern": d.subjectPattern.map(JSON.string),
            "authentication": .string(d.authentication),
            "clientId": d.clientId.map(JSON.string),
            "clientKey": d.clientKey.map(JSON.string),
            "companyId": d.companyId.map(JSON.string),
            "forwardDeviceCookies": .strings(d.forwardDeviceCookies),
            "headers": .strings(d.headers),
            "name": .string(d.name),
            "nameIdFormat": d.nameIdFormat.map(JSON.string),
            "queries": .strings(d.queries),
            "scope": d.scope.map(JSON.string),
            "timeout": .number(d.timeoutMilliseconds),
            "tokenServiceUser": d.tokenServiceUser.map(JSON.string),
            "tokenServiceURL": d.tokenServiceURL.map(JSON.string),
            "url": .string(d.url),
            "user": d.user.map(JSON.string),
            "userIdSource": d.userIdSource.map(JSON.string),
        ]
        return .sortedObject(members.compactMapValues { $0 })
    }
}

/// The answer to `POST /admin/v1/config/reload`: what is in force now, or (`422`) why the new
/// configuration was refused.
struct ReloadJSON {
    var outcome: ReloadOutcome

    var status: HTTPResponse.Status {
        switch outcome {
        case .reloaded: .ok
        case .rejected: .unprocessableContent
        }
    }

    var json: JSON {
        switch outcome {
        case .reloaded(let apps, let destinations, let users):
            ["apps": .number(apps), "destinations": .number(destinations), "status": "reloaded", "users": .number(users)]
        case .rejected(let problems):
            [
                "error": [
                    "code": "CONFIG_INVALID",
                    "message": [
                        "lang": "en", "value": .string("the new configuration has \(problems.count) problem(s); the old one stays in force"),
                    ],
                ],
                "problems": .strings(problems),
            ]
        }
    }
}
