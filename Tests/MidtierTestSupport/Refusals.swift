package import MidtierHTTP

/// The refusal `body` throws, or nil when it throws none: for tests of the operations that
/// refuse with a ``Refusal`` (its status, code and message are what a caller sees).
package func refusal(of body: () async throws(Refusal) -> Void) async -> Refusal? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}
