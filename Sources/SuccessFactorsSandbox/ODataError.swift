import MidtierCore
import MidtierJSON

/// An OData error as SuccessFactors answers it: an HTTP status and a JSON body
/// `{"error":{"code":"…","message":{"lang":"en-US","value":"…"}}}`.
///
/// Codes used, as SuccessFactors names them (SAP KBAs 2545055, 2546923, 2584770, 2343596):
/// - `COE_ENTITY_NOT_FOUND` (400): unknown entity set, "[COE0007]invalid entity (or function) name: X".
/// - `COE_PROPERTY_NOT_FOUND` (400): unknown property in a query option or path.
/// - `COE_BAD_PROPERTY_EXPRESSION` (400): "[COE0003]Bad property expression", e.g. expanding a
///   property that is not a navigation property.
/// - `COE_GENERAL_BAD_REQUEST` (400): any other malformed request (bad `$filter`, `$top`, …).
/// - `NotFoundException` (404): "X with key (…) not found!" for a key that does not exist or that
///   the user may not see.
/// - `METHOD_NOT_ALLOWED` (405): the sandbox is read-only (sandbox-specific code).
struct ODataError: Error, Sendable {
    let status: Int
    let code: String
    let message: String

    static func badRequest(_ message: String) -> ODataError {
        ODataError(status: 400, code: "COE_GENERAL_BAD_REQUEST", message: message)
    }

    static func entitySetNotFound(_ name: String) -> ODataError {
        ODataError(status: 400, code: "COE_ENTITY_NOT_FOUND", message: "[COE0007]invalid entity (or function) name: \(name)")
    }

    static func propertyNotFound(_ name: String, of type: ODataEntityType, in place: String) -> ODataError {
        ODataError(
            status: 400, code: "COE_PROPERTY_NOT_FOUND",
            message: "Invalid property name '\(name)' in \(place): entity \(type.name) has no property \(name).")
    }

    static func badPropertyExpression(_ message: String) -> ODataError {
        ODataError(status: 400, code: "COE_BAD_PROPERTY_EXPRESSION", message: "[COE0003]Bad property expression: \(message)")
    }

    static func notFound(_ type: ODataEntityType, key: String) -> ODataError {
        ODataError(status: 404, code: "NotFoundException", message: "\(type.name) with key \(key) not found!")
    }

    static func methodNotAllowed(_ method: String) -> ODataError {
        ODataError(
            status: 405, code: "METHOD_NOT_ALLOWED",
            message: "Method \(method) is not allowed: the SuccessFactors sandbox payroll service is read-only (GET only).")
    }

    var json: JSON {
        .object([
            "error": .object([
                "code": .string(code),
                "message": .object(["lang": .string("en-US"), "value": .string(message)]),
            ])
        ])
    }

    /// The JSON body.
    var body: [UInt8] { Array(json.serialized().utf8) }
}
