package import Logging
package import MidtierCore

extension Refusal {
    /// Runs a store operation; a failure is logged and answered 503 (the request can be
    /// retried), its detail only in the log.
    package static func unlessStoreFails<T>(_ logger: Logger, _ operation: () async throws(StoreError) -> T) async throws(Refusal) -> T {
        do {
            return try await operation()
        } catch {
            throw storeFailed(error, logger)
        }
    }

    /// The one answer to a store that failed: `503`, its detail logged, never shown.
    package static func storeFailed(_ error: any Error, _ logger: Logger) -> Refusal {
        logger.error("store failed", metadata: ["error": "\(error)"])
        return .storeUnavailable
    }

    package static let storeUnavailable = Refusal.unavailable("the store is not available; try again")
}
