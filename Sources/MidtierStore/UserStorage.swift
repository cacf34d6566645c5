package import MidtierCore

/// Where one JSON document of the Storage service's `currentuser` or `device` level lives
/// (docs/device-api.md, "User and device storage"): an app's document of a realm-qualified
/// user, on the user level or on one of the user's registrations.
/// One stored document of a level: its name and its JSON text as stored.
package struct StoredDocument: Sendable, Equatable {
    package var name: String
    package var text: String

    package init(name: String, text: String) {
        self.name = name
        self.text = text
    }
}

package struct StorageKey: Sendable, Equatable {
    package var app: String
    package var user: UserIdentity
    /// The registration of the `device` level; "" for the `currentuser` level.
    package var registration: String
    /// The document's name: the first segment of the key path (SAP's configuration name).
    package var name: String

    package init(app: String, user: UserIdentity, registration: String, name: String) {
        self.app = app
        self.user = user
        self.registration = registration
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
