import Foundation
package import Logging
import MidtierCore
import MidtierJSON

/// One JSON object per line on standard error: `{"time":..,"level":..,"label":..,"message":..,
/// ...metadata}`. Callers never put tokens, assertions, passwords or cookies in metadata.
package struct JSONLogHandler: LogHandler {
    package var logLevel: Logger.Level
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    let label: String

    package init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var members: [String: JSON] = [:]
        for (key, value) in metadata { members[key] = Self.plain(value) }
        // (The request's trace id, docs/operations.md "Traces".)
        for (key, value) in metadataProvider?.get() ?? [:] { members[key] = Self.plain(value) }
        for (key, value) in event.metadata ?? [:] { members[key] = Self.plain(value) }
        members["time"] = .string(ISO8601Time.format(Date()))
        members["level"] = .string(event.level.rawValue)
        members["label"] = .string(label)
        members["message"] = .string(event.message.description)
        let line = JSON.sortedObject(members).serialized() + "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func plain(_ value: Logger.Metadata.Value) -> JSON {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let values): .array(values.map(plain))
        case .dictionary(let values): .sortedObject(values.mapValues(plain))
        }
    }
}
