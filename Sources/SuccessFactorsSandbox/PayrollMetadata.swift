/// The service's `$metadata`: an OData v2 EDMX document generated from `PayrollModel`.
///
/// `edmx:Edmx Version="1.0"`, `m:DataServiceVersion="2.0"`, and one schema `SFOData` holding the
/// entity types, the associations and the default entity container (`EntityContainer`) with
/// entity sets and association sets. Every navigation property has its association and
/// association set, which clients such as Python's pyodata require. `Edm.Decimal` properties
/// carry neither `Precision` nor `Scale`, as in SuccessFactors. The `sap:` attributes use
/// SuccessFactors' namespace.
///
/// SuccessFactors itself puts the entity container into a second schema, `SFODataSet`. The
/// sandbox keeps everything in `SFOData` because pyodata looks for an association's association
/// set in the association's own schema and cannot follow navigation properties otherwise.
enum PayrollMetadata {
    static let document: [UInt8] = Array(xml(for: PayrollModel.model).utf8)

    static func xml(for model: ODataModel) -> String {
        var lines: [String] = [
            #"<?xml version="1.0" encoding="utf-8"?>"#,
            #"<edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" "#
                + #"xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" "#
                + #"xmlns:sap="http://www.successfactors.com/edm/sap">"#,
            #"  <edmx:DataServices m:DataServiceVersion="2.0">"#,
        ]
        lines.append("    <Schema Namespace=\"\(model.namespace)\" \(edmNamespace)>")
        lines += entityTypes(model)
        lines += associations(model)
        lines += container(model)
        lines += ["    </Schema>", "  </edmx:DataServices>", "</edmx:Edmx>"]
        return lines.joined(separator: "\n") + "\n"
    }

    private static let edmNamespace = #"xmlns="http://schemas.microsoft.com/ado/2008/09/edm""#

    private static func container(_ model: ODataModel) -> [String] {
        var lines = [#"      <EntityContainer Name="EntityContainer" m:IsDefaultEntityContainer="true">"#]
        for type in model.entityTypes {
            lines.append(
                "        <EntitySet Name=\"\(type.name)\" EntityType=\"\(model.qualifiedName(of: type))\""
                    + " sap:label=\"\(escape(type.name))\" sap:creatable=\"false\" sap:updatable=\"false\""
                    + " sap:upsertable=\"false\" sap:deletable=\"false\"/>")
        }
        for type in model.entityTypes {
            for navigation in type.navigations {
                let name = navigation.associationName(from: type)
                let (sourceRole, targetRole) = roles(type, navigation)
                lines += [
                    "        <AssociationSet Name=\"\(name)\" Association=\"\(model.namespace).\(name)\">",
                    "          <End EntitySet=\"\(type.name)\" Role=\"\(sourceRole)\"/>",
                    "          <End EntitySet=\"\(navigation.target)\" Role=\"\(targetRole)\"/>",
                    "        </AssociationSet>",
                ]
            }
        }
        lines.append("      </EntityContainer>")
        return lines
    }

    private static func entityTypes(_ model: ODataModel) -> [String] {
        var lines: [String] = []
        for type in model.entityTypes {
            lines.append("      <EntityType Name=\"\(type.name)\">")
            lines.append("        <Key>")
            lines += type.keys.map { "          <PropertyRef Name=\"\($0)\"/>" }
            lines.append("        </Key>")
            for property in type.properties {
                var attributes = "Name=\"\(property.name)\" Type=\"\(property.type.rawValue)\""
                if !property.nullable { attributes += " Nullable=\"false\"" }
                if let maxLength = property.maxLength { attributes += " MaxLength=\"\(maxLength)\"" }
                attributes += " sap:label=\"\(escape(property.label))\""
                lines.append("        <Property \(attributes)/>")
            }
            for navigation in type.navigations {
                let (sourceRole, targetRole) = roles(type, navigation)
                lines.append(
                    "        <NavigationProperty Name=\"\(navigation.name)\""
                        + " Relationship=\"\(model.namespace).\(navigation.associationName(from: type))\""
                        + " FromRole=\"\(sourceRole)\" ToRole=\"\(targetRole)\"/>")
            }
            lines.append("      </EntityType>")
        }
        return lines
    }

    private static func associations(_ model: ODataModel) -> [String] {
        var lines: [String] = []
        for type in model.entityTypes {
            for navigation in type.navigations {
                let (sourceRole, targetRole) = roles(type, navigation)
                let sourceMultiplicity = navigation.toMany ? "1" : "*"
                let targetMultiplicity = navigation.toMany ? "*" : "0..1"
                lines += [
                    "      <Association Name=\"\(navigation.associationName(from: type))\">",
                    "        <End Type=\"\(model.namespace).\(type.name)\" Multiplicity=\"\(sourceMultiplicity)\" Role=\"\(sourceRole)\"/>",
                    "        <End Type=\"\(model.namespace).\(navigation.target)\" Multiplicity=\"\(targetMultiplicity)\" Role=\"\(targetRole)\"/>",
                    "      </Association>",
                ]
            }
        }
        return lines
    }

    /// Role names of an association's ends; distinct even if a type navigated to itself.
    private static func roles(_ type: ODataEntityType, _ navigation: ODataNavigation) -> (String, String) {
        navigation.target == type.name ? (type.name, navigation.target + "_" + navigation.name) : (type.name, navigation.target)
    }

    private static func escape(_ text: String) -> String {
        var output = ""
        for character in text {
            switch character {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            default: output.append(character)
            }
        }
        return output
    }
}
