package import HTTPTypes
package import Hummingbird
package import MidtierCore
package import MidtierJSON

extension Response {
    /// A JSON answer written by the core's writer (``JSON/serialized()``), as every JSON body
    /// Midtier sends is.
    package static func json(_ body: JSON, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.contentType] = "application/json;charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body.serialized())))
    }
}
