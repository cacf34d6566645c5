import AsyncHTTPClient
import ExtrasBase64
import MidtierCore
import NIOCore
import NIOHTTP1
import RequestTracing

/// One POST of a form to an OAuth 2.0 token endpoint and the token read from its JSON answer:
/// what every grant Midtier uses shares (docs/forwarding.md).
enum TokenServiceRequest {
    /// Posts `form` to `url` (with `Authorization: Basic` of `basic` when given) and reads the
    /// token. A refusal's reason never carries anything of `secrets`.
    static func post(
        _ form: [(String, String)], to url: String, basic: (user: String, password: String)?, httpClient: HTTPClient,
        timeout: TimeAmount, secrets: [String]
    ) async throws(TokenExchangeError) -> AccessToken {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        var secrets = secrets
        if let basic {
            let credentials = Base64.encodeToString(bytes: Array("\(basic.user):\(basic.password)".utf8))
            request.headers.add(name: "Authorization", value: "Basic " + credentials)
            // A service that quotes the header it got must not show it on.
            secrets += [credentials, "\(basic.user):\(basic.password)", basic.password]
        }
        // The token service's call is part of the device request's trace (docs/operations.md, "Traces").
        for (name, value) in RequestTrace.propagationHeaders() { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(string: FormEncoding.encode(form)))

        let status: Int
        var body: ByteBuffer
        do {
            let response = try await httpClient.execute(request, timeout: timeout)
            status = Int(response.status.code)
            body = try await response.body.collect(upTo: 1 << 20)
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            throw .timedOut
        } catch let error as NIOTooManyBytesError {
            _ = error
            throw .invalidResponse("the answer is larger than 1 MiB")
        } catch {
            throw .unreachable(String(describing: error))
        }
        let bytes = body.readBytes(length: body.readableBytes) ?? []
        guard (200..<300).contains(status) else {
            // As sent in the form, too (percent-encoded).
            let all = secrets + secrets.map { $0.percentEncoded() }.filter { !secrets.contains($0) }
            throw .refused(status: status, reason: TokenResponse.reason(fromErrorBody: bytes, avoiding: all))
        }
        return try TokenResponse.parse(bytes)
    }
}
