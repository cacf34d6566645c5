import MultipartKit
import NIOCore

/// The parts of a `multipart/form-data` (or any `multipart/…`) body: each one's bytes, in order.
enum ClientLogMultipart {
    /// The `boundary` parameter of a multipart `Content-Type`, unquoted; nil when the type is
    /// not multipart. A multipart type without a usable boundary is an error.
    static func boundary(of contentType: String) throws(ClientUploadError) -> String? {
        let parameters = contentType.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let type = parameters.first, type.lowercased().hasPrefix("multipart/") else { return nil }
        for parameter in parameters.dropFirst() {
            guard let equals = parameter.firstIndex(of: "="),
                  parameter[..<equals].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else { continue }
            var value = parameter[parameter.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            guard !value.isEmpty, value.utf8.count <= 70 else { break }
            return value
        }
        throw .invalid("the multipart Content-Type has no boundary (or one longer than 70 characters)")
    }

    /// The body of each part. A body that ends inside a part, or holds none, is an error.
    static func parts(of bytes: [UInt8], boundary: String, maxParts: Int) throws(ClientUploadError) -> [[UInt8]] {
        final class Collected {
            var parts: [[UInt8]] = []
            var current: [UInt8] = []
            var open = false
        }
        let collected = Collected()
        let parser = MultipartParser(boundary: boundary)
        parser.onHeader = { _, _ in collected.open = true }
        parser.onBody = { buffer in
            collected.open = true
            collected.current.append(contentsOf: buffer.readableBytesView)
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        }
        parser.onPartComplete = {
            collected.parts.append(collected.current)
            collected.current = []
            collected.open = false
        }
        do {
            try parser.execute(bytes)
        } catch {
            throw .invalid("the multipart body is malformed (a part's headers cannot be read)")
        }
        guard !collected.open else { throw .invalid("the multipart body ends inside a part (no closing boundary)") }
        guard !collected.parts.isEmpty else { throw .invalid("the multipart body has no part with the boundary its Content-Type names") }
        guard collected.parts.count <= maxParts else { throw .tooLarge("the multipart body has more than \(maxParts) parts") }
        return collected.parts
    }
}
