import Foundation

/// What "the same device" means for the lock and wipe rules (docs/identity.md, "The same
/// device"): two `DeviceId`s name one device when their normal forms have the same bytes. The
/// normal form is the id in Unicode compatibility composition (NFKC, so a fullwidth `ｂ` is a
/// `b`), in lower case, without default-ignorable code points (zero-width spaces and joiners,
/// soft hyphens, variation selectors) and without white space at either end. So `BOB-DEV-1`,
/// `bob-dev-1 ` and `bob-dev-1` followed by a zero-width space are the device `bob-dev-1`;
/// `bob-dev-2` is another.
///
/// The `DeviceId` is kept as the device sent it; only comparisons use the normal form. An id
/// whose normal form is empty (only spaces, say) names no device, like an empty one.
package enum DeviceIdentity {
    package static func normalForm(_ id: String) -> String {
        var kept = String.UnicodeScalarView()
        for scalar in id.precomposedStringWithCompatibilityMapping.lowercased().unicodeScalars
        where !scalar.properties.isDefaultIgnorableCodePoint {
            kept.append(scalar)
        }
        return String(kept).trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCompatibilityMapping
    }

    /// Whether `first` and `second` name the same device (their normal forms, by bytes); an id
    /// that names no device is the same as none.
    package static func same(_ first: String, _ second: String) -> Bool {
        normalForm(first).utf8.elementsEqual(normalForm(second).utf8)
    }

    /// Whether `id` names a device at all (its normal form is not empty).
    package static func namesADevice(_ id: String) -> Bool {
        !normalForm(id).isEmpty
    }
}
