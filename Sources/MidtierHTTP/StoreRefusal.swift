import Logging
import MidtierStore

extension Refusal {
    /// Runs a store operation; a failure is logged and answered 503 (the request can be
    /// retried), its detail only in the log.
    public static func unlessStoreFails<T>(_ logger: Logger, _ operation: () async throws(StoreError) -> T) async throws(Refusal) -> T {
        do {
            return try await operation()
        } catch {
            logger.error("store failed", metadata: ["error": "\(error)"])
            throw .unavailable("the store is not available; try again")
        }
    }
}
