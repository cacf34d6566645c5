package import MidtierCore

/// One stored document of a level: its name and its JSON text as stored.
package struct StoredDocument: Sendable, Equatable {
    package var name: String
    package var text: String

    package init(name: String, text: String) {
        self.name = name
        self.text = text
    }
}

/// The level a stored document of the Storage service lives on (docs/device-api.md, "User and
/// device storage"). The app's `global` level is never stored: it is the app's configuration.
package enum StorageLevel: Sendable, Hashable {
    /// `currentuser`: the user's own documents of the app.
    case user
    /// `device/{registrationId}`: the documents of one of the user's registrations.
    case registration(String)

    /// The level as the stores keep it in `registration_id`: the registration's id, "" for
    /// the user level (an id is never empty).
    package init(storedRegistration: String) {
        self = storedRegistration.isEmpty ? .user : .registration(storedRegistration)
    }

    /// The value of the stores' `registration_id` column for this level.
    package var storedRegistration: String {
        switch self {
        case .user: ""
        case .registration(let id): id
        }
    }

    /// The registration of the `device` level; nil for the user level.
    package var registration: String? {
        switch self {
        case .user: nil
        case .registration(let id): id
        }
    }
}

/// Where one JSON document of the Storage service's `currentuser` or `device` level lives
/// (docs/device-api.md, "User and device storage"): an app's document of a realm-qualified
/// user, on the user level or on one of the user's registrations.
package struct StorageKey: Sendable, Equatable {
    package var app: String
    package var user: UserIdentity
    package var level: StorageLevel
    /// The document's name: the first segment of the key path (SAP's configuration name).
    package var name: String

    package init(app: String, user: UserIdentity, level: StorageLevel, name: String) {
        self.app = app
        self.user = user
        self.level = level
        self.name = name
    }
}

/// A stored document as admins see it: its place and size, never its value.
package struct StorageEntry: Sendable, Equatable {
    package var key: StorageKey
    /// The document's size in bytes: its name and its UTF-8 text (``StorageKey/storedSize(of:)``).
    package var size: Int
    /// Milliseconds since 1970.
    package var updatedAt: Int64

    package init(key: StorageKey, size: Int, updatedAt: Int64) {
        self.key = key
        self.size = size
        self.updatedAt = updatedAt
    }
}

/// What a storage write does with the document it finds (nil: none yet), decided inside the
/// write's transaction.
package enum StorageEdit<Reason: Sendable>: Sendable {
    /// Keep this text as the document.
    case set(String)
    /// Delete the document.
    case remove
    /// Change nothing, for this reason (a key that is not there, a document grown too large).
    case refuse(Reason)
}

/// The result of a storage write.
package enum StorageWrite<Reason: Sendable>: Sendable {
    case written
    case removed
    case refused(Reason)
    /// The user's documents together would be larger than `limit` bytes; nothing was written.
    case overUserLimit(limit: Int)
    /// A `device` level document of a registration that is not the user's active registration
    /// of the app (deleted, locked or wiped meanwhile); nothing was written.
    case registrationInactive
}

extension StorageKey {
    /// What a document with `text` under this key takes in the user's quota: the bytes of its
    /// name and of its JSON text, as stored (docs/device-api.md, "User and device storage").
    package func storedSize(of text: String) -> Int { name.utf8.count + text.utf8.count }
}
