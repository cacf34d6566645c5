import Foundation
import MidtierCore
import MidtierJSON

extension Registration {
    /// `details` as stored: a JSON object of strings.
    var detailsText: String {
        JSON.sortedObject(details.mapValues(JSON.string)).serialized()
    }

    /// `details` from its stored text (nothing from text that is not a JSON object of strings).
    static func details(from text: String) -> [String: String] {
        guard case .success(let object) = StrictJSON.object(Array(text.utf8)) else { return [:] }
        return object.compactMapValues { value in
            if case .string(let text) = value { text } else { nil }
        }
    }
}
