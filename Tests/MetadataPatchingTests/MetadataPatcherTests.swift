import Foundation
import MidtierCore
import NIOCore
import Testing

@testable import Forwarding
@testable import MetadataPatching

@Suite struct MetadataPatcherTests {
    static let document = """
        <?xml version="1.0" encoding="utf-8"?><edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx">\
        <edmx:DataServices><Schema Namespace="SFOData" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">\
        <EntityType Name="Items"><Property Name="amount" Type="Edm.Decimal" Nullable="true"/><Property Name="other" Type="Edm.String"/></EntityType>\
        </Schema></edmx:DataServices></edmx:Edmx>
        """

    @Test func setsFacetsAndReportsWhatMatchedNothing() throws {
        let result = try MetadataPatcher.apply(
            [
                MetadataPatch(entityType: "Items", property: "amount", set: ["Precision": "15", "Scale": "2"]),
                MetadataPatch(entityType: "Items", property: "missing", set: ["Scale": "2"]),
            ], to: Array(Self.document.utf8))
        let text = String(decoding: result.document, as: UTF8.self)
        #expect(text.contains(#"<Property Name="amount" Type="Edm.Decimal" Nullable="true" Precision="15" Scale="2"/>"#), "\(text)")
        #expect(text.contains(#"<Property Name="other" Type="Edm.String"/>"#))
        #expect(result.unmatched.map(\.property) == ["missing"])
    }

    /// Whether a Scale fits is judged on the patched document: a Scale alone fits the
    /// back end's own Precision; one without a Precision, or above it, is reported.
    @Test func judgesScaleOnThePatchedDocument() throws {
        let document = """
            <?xml version="1.0" encoding="utf-8"?><edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx">\
            <edmx:DataServices><Schema Namespace="SFOData" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">\
            <EntityType Name="Items"><Property Name="fits" Type="Edm.Decimal" Precision="15"/><Property Name="bare" Type="Edm.Decimal"/>\
            <Property Name="narrow" Type="Edm.Decimal" Precision="1"/><Property Name="variable" Type="Edm.Decimal"/>\
            <Property Name="untouched" Type="Edm.Decimal" Scale="4"/></EntityType>\
            </Schema></edmx:DataServices></edmx:Edmx>
            """
        let result = try MetadataPatcher.apply(
            [
                MetadataPatch(entityType: "Items", property: "fits", set: ["Scale": "2"]),
                MetadataPatch(entityType: "Items", property: "bare", set: ["Scale": "2"]),
                MetadataPatch(entityType: "Items", property: "narrow", set: ["Scale": "2"]),
                MetadataPatch(entityType: "Items", property: "narrow", set: ["MaxLength": "9"]),
                MetadataPatch(entityType: "Items", property: "variable", set: ["Scale": "variable"]),
            ], to: Array(document.utf8))
        #expect(result.unmatched.isEmpty)
        #expect(
            result.unfittingScales == [
                UnfittingScale(entityType: "Items", property: "bare", scale: 2, precision: nil),
                UnfittingScale(entityType: "Items", property: "narrow", scale: 2, precision: 1),
            ])
        #expect(
            result.unfittingScales.map(\.description) == [
                "property bare of entity type Items: Scale 2 has no Precision",
                "property narrow of entity type Items: Scale 2 is larger than its Precision 1",
            ])
        let text = String(decoding: result.document, as: UTF8.self)
        #expect(text.contains(#"<Property Name="fits" Type="Edm.Decimal" Precision="15" Scale="2"/>"#), "\(text)")
    }

    @Test func refusesHostileDocuments() {
        for bad in [
            "", "<", "<!DOCTYPE x [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]><x>&b;</x>",
            "<!DOCTYPE x SYSTEM \"http://127.0.0.1:1/evil.dtd\"><x/>",
        ] {
            #expect(throws: MetadataPatchError.self) { try MetadataPatcher.apply([], to: Array(bad.utf8)) }
        }
    }
}
