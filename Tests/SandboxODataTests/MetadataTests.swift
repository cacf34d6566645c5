import Foundation
import SuccessFactorsSandbox
import Testing

#if canImport(FoundationXML)
import FoundationXML
#endif

/// `$metadata` is an OData v2 EDMX document a client such as pyodata can load.
@Suite struct MetadataTests {
    /// Every element of the document with its attributes, in document order.
    final class Collector: NSObject, XMLParserDelegate {
        struct Element {
            let name: String
            let attributes: [String: String]
            /// Names of the enclosing elements, outermost first.
            let ancestors: [String]
        }

        var elements: [Element] = []
        private var stack: [String] = []

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            elements.append(Element(name: elementName, attributes: attributes, ancestors: stack))
            stack.append(elementName)
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            stack.removeLast()
        }
    }

    private func metadata() throws -> [Collector.Element] {
        let result = get("$metadata")
        #expect(result.status == 200)
        #expect(result.contentType == "application/xml;charset=utf-8")
        let parser = XMLParser(data: Data(result.body))
        let collector = Collector()
        parser.delegate = collector
        try #require(parser.parse(), "not well-formed XML: \(String(describing: parser.parserError))")
        return collector.elements
    }

    @Test func isAnODataV2Edmx() throws {
        let elements = try metadata()
        let root = try #require(elements.first)
        #expect(root.name == "edmx:Edmx")
        #expect(root.attributes["Version"] == "1.0")
        let dataServices = try #require(elements.first { $0.name == "edmx:DataServices" })
        #expect(dataServices.attributes["m:DataServiceVersion"] == "2.0")
        let namespaces = elements.filter { $0.name == "Schema" }.compactMap { $0.attributes["Namespace"] }
        #expect(namespaces == ["SFOData"], "one schema, so pyodata finds association sets next to associations")
        let container = try #require(elements.first { $0.name == "EntityContainer" })
        #expect(container.attributes["m:IsDefaultEntityContainer"] == "true")
        let sets = elements.filter { $0.name == "EntitySet" }.compactMap { $0.attributes["Name"] }
        #expect(
            Set(sets) == [
                "User", "EmpEmployment", "PaymentInformationV3", "PaymentInformationDetailV3", "Bank",
                "EmployeePayrollRunResults", "EmployeePayrollRunResultsItems",
            ])
    }

    @Test func amountIsAPlainDecimal() throws {
        let elements = try metadata()
        let itemProperties = elements.filter {
            $0.name == "Property" && $0.ancestors.last == "EntityType"
        }
        let amount = try #require(
            itemProperties.first {
                $0.attributes["Name"] == "amount" && $0.ancestors.contains("EntityType")
            })
        #expect(amount.attributes["Type"] == "Edm.Decimal")
        #expect(amount.attributes["Scale"] == nil)
        #expect(amount.attributes["Precision"] == nil)
        #expect(elements.allSatisfy { $0.attributes["Scale"] == nil && $0.attributes["Precision"] == nil })
    }

    @Test func typesHaveKeysAndExpectedProperties() throws {
        let elements = try metadata()
        var properties: [String: [String: String]] = [:]  // type → property → Edm type
        var keys: [String: [String]] = [:]
        var currentType = ""
        for element in elements {
            switch element.name {
            case "EntityType": currentType = element.attributes["Name"] ?? ""
            case "PropertyRef": keys[currentType, default: []].append(element.attributes["Name"] ?? "")
            case "Property": properties[currentType, default: [:]][element.attributes["Name"] ?? ""] = element.attributes["Type"]
            default: break
            }
        }
        #expect(keys["User"] == ["userId"])
        #expect(keys["EmployeePayrollRunResults"] == ["externalCode", "mdfSystemEffectiveStartDate"])
        #expect(keys["Bank"] == ["externalCode"])
        let run = properties["EmployeePayrollRunResults"] ?? [:]
        #expect(run["payDate"] == "Edm.DateTime")
        #expect(run["startDateWhenPaid"] == "Edm.DateTime")
        #expect(run["currency"] == "Edm.String")
        #expect(run["userId"] == "Edm.String")
        let item = properties["EmployeePayrollRunResultsItems"] ?? [:]
        #expect(item["amount"] == "Edm.Decimal")
        #expect(item["quantity"] == "Edm.Decimal")
        #expect(item["wageType"] == "Edm.String")
        // Every key property exists.
        for (type, names) in keys {
            for name in names { #expect(properties[type]?[name] != nil, "\(type).\(name)") }
        }
    }

    @Test func navigationPropertiesHaveAssociationsAndSets() throws {
        let elements = try metadata()
        let associations = elements.filter { $0.name == "Association" }
        let associationSets = elements.filter { $0.name == "AssociationSet" }
        let entitySets = Set(elements.filter { $0.name == "EntitySet" }.compactMap { $0.attributes["Name"] })
        let navigations = elements.filter { $0.name == "NavigationProperty" }
        #expect(navigations.count == 8)
        for navigation in navigations {
            let relationship = try #require(navigation.attributes["Relationship"])
            #expect(relationship.hasPrefix("SFOData."))
            let name = String(relationship.dropFirst("SFOData.".count))
            let index = try #require(elements.firstIndex { $0.name == "Association" && $0.attributes["Name"] == name })
            let roles = elements[(index + 1)...].prefix(2).filter { $0.name == "End" }.compactMap { $0.attributes["Role"] }
            let expectedRoles = Set([navigation.attributes["FromRole"], navigation.attributes["ToRole"]].compactMap { $0 })
            #expect(Set(roles) == expectedRoles)
            #expect(expectedRoles.count == 2)
            let set = try #require(associationSets.first { $0.attributes["Association"] == relationship })
            let setIndex = try #require(elements.firstIndex { $0.name == "AssociationSet" && $0.attributes["Name"] == set.attributes["Name"] })
            let setEnds = elements[(setIndex + 1)...].prefix(2)
            #expect(setEnds.allSatisfy { $0.name == "End" && entitySets.contains($0.attributes["EntitySet"] ?? "") })
        }
        #expect(associations.count == navigations.count)
        #expect(associationSets.count == navigations.count)
        let itemsNavigation = try #require(navigations.first { $0.attributes["Name"] == "employeePayrollRunResultsItems" })
        let itemsAssociation = try #require(
            elements.firstIndex {
                $0.name == "Association" && "SFOData." + ($0.attributes["Name"] ?? "") == itemsNavigation.attributes["Relationship"]
            })
        let toEnd = elements[(itemsAssociation + 1)...].prefix(2).first { $0.attributes["Role"] == itemsNavigation.attributes["ToRole"] }
        #expect(toEnd?.attributes["Multiplicity"] == "*")
    }

    @Test func metadataIgnoresQueryOptionsAndTrailingSlash() {
        #expect(get("$metadata", "$format=json").contentType == "application/xml;charset=utf-8")
        #expect(get("/$metadata/").status == 200)
    }
}
