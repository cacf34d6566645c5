import Logging
import MidtierHTTP
import MidtierStore

extension Refusal {
    /// Runs a store operation; a failure is logged and answered 503 (the request can be
    /// retried), its detail only in the log.
    static func unlessStoreFails<T>(_ logger: Logger, _ operation: () async throws(StoreError) -> T) async throws(Refusal) -> T {
        do {
            return try await operation()
        } catch {
            logger.error("store failed", metadata: ["error": "\(error)"])
            throw .unavailable("the registration store is not available; try again")
        }
    }
}
