/// The store is unreachable or failed; the request can be retried.
package struct StoreError: Error, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
