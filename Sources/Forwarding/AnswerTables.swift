import MidtierCore
import Synchronization

/// The byte replacements a destination's answers get for one back-end credential
/// (docs/forwarding.md, "Answers"): the credential's redaction alone, and the redaction followed
/// by the destination's URL rewriting. Made once per credential and destination
/// (``AnswerTableMemo``), not on every call.
package struct AnswerTables: Sendable {
    /// The credential Midtier sent, kept out of what the device sees.
    package let redaction: CredentialRedaction
    /// The destination's URL rewriting (for `Location` and `Content-Location`).
    let rewriter: URLRewriter
    /// The credential first (a URL never holds it whole), then the back end's URLs.
    let redactingAndRewriting: ByteReplacements

    init(authorization: String?, rewriter: URLRewriter) {
        redaction = CredentialRedaction(authorization: authorization)
        self.rewriter = rewriter
        redactingAndRewriting = redaction.replacements + rewriter.replacements
    }
}

/// The ``AnswerTables`` of the credentials in use at one destination, by the credential's exact
/// bytes. A table is made from its credential's bytes alone, so it can only serve a call with
/// the identical credential: nothing of one user's call reaches another's. At most `capacity`
/// credentials are kept (one per user with a token, plus the destination's own); when full,
/// the memo starts again empty. Tokens are already held in memory by the token cache; this
/// holds nothing more secret.
final class AnswerTableMemo: Sendable {
    private let rewriter: URLRewriter
    private let capacity: Int
    private let tables = Mutex<[ExactString: AnswerTables]>([:])
    /// Calls without a credential (`NoAuthentication`).
    private let uncredentialed: AnswerTables

    init(rewriter: URLRewriter, capacity: Int = 4096) {
        self.rewriter = rewriter
        self.capacity = capacity
        uncredentialed = AnswerTables(authorization: nil, rewriter: rewriter)
    }

    func tables(for authorization: String?) -> AnswerTables {
        guard let authorization else { return uncredentialed }
        let key = ExactString(authorization)
        if let known = tables.withLock({ $0[key] }) { return known }
        let made = AnswerTables(authorization: authorization, rewriter: rewriter)
        tables.withLock { tables in
            if tables.count >= capacity { tables.removeAll(keepingCapacity: true) }
            tables[key] = made
        }
        return made
    }

    /// How many credentials' tables are kept (tests).
    var count: Int { tables.withLock { $0.count } }
}
