import MetadataPatching
import MidtierCore

/// `metadata`: a back end's OData `$metadata` document patched as a destination's
/// `metadataPatches` patch it (MetadataPatcher.apply, libxml2), with two fixed patches.
enum MetadataTarget {
    static let patches = [
        MetadataPatch(entityType: "PayrollItem", property: "Amount", set: ["Precision": "15", "Scale": "2"]),
        MetadataPatch(entityType: "Employee", property: "Name", set: ["MaxLength": "80", "sap:label": "Name"]),
    ]

    static func run(_ bytes: [UInt8]) {
        _ = try? MetadataPatcher.apply(patches, to: bytes)
    }
}
