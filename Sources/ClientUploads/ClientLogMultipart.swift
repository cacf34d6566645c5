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
                parameter[..<equals].trimmingCharacters(in: .whitespaces).lowercased() == "boundary"
            else { continue }
            var value = parameter[parameter.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            guard !value.isEmpty, value.utf8.count <= 70 else { break }
            return value
        }
        throw .invalid("the multipart Content-Type has no boundary (or one longer than 70 characters)")
    }

    /// Whether a byte of 0x80 or more stands where a part's headers may be: from any
    /// `--boundary` to the next blank line (CR LF CR LF), or the end. MultipartKit 4.7.1 looks
    /// such a byte of a header name up in a table of 128 and traps ("Index out of range"): one
    /// 10-byte upload stopped the process (found by the fuzz target `client-log`,
    /// docs/reliability.md). The areas read are a superset of what the parser takes for
    /// headers, each byte looked at once.
    static func hasNonASCIIHeaderBytes(_ bytes: [UInt8], boundary: String) -> Bool {
        let delimiter = Array("--\(boundary)".utf8)
        var position = 0
        while let delimiterAt = firstIndex(of: delimiter, in: bytes, from: position) {
            let headers = delimiterAt + delimiter.count
            let end = firstIndex(of: [13, 10, 13, 10], in: bytes, from: headers) ?? bytes.count
            if bytes[headers..<end].contains(where: { $0 >= 0x80 }) { return true }
            position = end
        }
        return false
    }

    /// Where `needle` first stands in `bytes` at or after `start` (Knuth–Morris–Pratt: each
    /// byte looked at a bounded number of times, whatever the body holds).
    static func firstIndex(of needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, start < bytes.count else { return nil }
        var fallback = [Int](repeating: 0, count: needle.count)
        var matched = 0
        for index in 1..<max(1, needle.count) {
            while matched > 0 && needle[index] != needle[matched] { matched = fallback[matched - 1] }
            if needle[index] == needle[matched] { matched += 1 }
            fallback[index] = matched
        }
        matched = 0
        for index in start..<bytes.count {
            while matched > 0 && bytes[index] != needle[matched] { matched = fallback[matched - 1] }
            if bytes[index] == needle[matched] { matched += 1 }
            if matched == needle.count { return index - needle.count + 1 }
        }
        return nil
    }

    /// The body of each part. A body that ends inside a part, or holds none, is an error.
    static func parts(of bytes: [UInt8], boundary: String, maxParts: Int) throws(ClientUploadError) -> [[UInt8]] {
        final class Collected {
            var parts: [[UInt8]] = []
            var current: [UInt8] = []
            var open = false
        }
        guard !hasNonASCIIHeaderBytes(bytes, boundary: boundary) else {
            throw .invalid("a part's headers hold a byte that is not ASCII")
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
