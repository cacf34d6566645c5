import Dispatch

/// The fuzz targets (docs/reliability.md, "Fuzzing"): each feeds its input bytes to a parser
/// that reads device or back-end bytes, the way the server calls it. A thrown error or an error
/// answer is a fine outcome; only a crash, a trap, a sanitizer report or a hang is a finding.
package enum FuzzTarget: String, CaseIterable, Sendable {
    case json
    case clientLog = "client-log"
    case clientLogLines = "client-log-lines"
    case proxyPath = "proxy-path"
    case atom
    case discovery
    case pushMessage = "push-message"
    case pushBulk = "push-bulk"
    case pushCapability = "push-capability"
    case jwt
    case saml
    case tokenResponse = "token-response"
    case setCookie = "set-cookie"
    case metadata
    case config
    case storage
    case subjectPattern = "subject-pattern"

    /// Runs the target over one input (synchronously; an async target blocks the calling
    /// thread until it is done, which is fine for libFuzzer's thread, not for a task).
    package func run(_ bytes: [UInt8]) {
        switch self {
        case .json: JSONTarget.run(bytes)
        case .clientLog: ClientLogTarget.run(bytes)
        case .clientLogLines: ClientLogLinesTarget.run(bytes)
        case .proxyPath: ProxyPathTarget.run(bytes)
        case .atom: AtomTarget.run(bytes)
        case .discovery: DiscoveryTarget.run(bytes)
        case .pushMessage: PushMessageTarget.run(bytes)
        case .pushBulk: PushBulkTarget.run(bytes)
        case .pushCapability: PushCapabilityTarget.run(bytes)
        case .jwt: blocking { await JWTTarget.run(bytes) }
        case .saml: SAMLTarget.run(bytes)
        case .tokenResponse: TokenResponseTarget.run(bytes)
        case .setCookie: SetCookieTarget.run(bytes)
        case .metadata: MetadataTarget.run(bytes)
        case .config: ConfigTarget.run(bytes)
        case .storage: StorageTarget.run(bytes)
        case .subjectPattern: SubjectPatternTarget.run(bytes)
        }
    }

    /// Runs the target over one input from a task (the tests).
    package func runAsync(_ bytes: [UInt8]) async {
        switch self {
        case .jwt: await JWTTarget.run(bytes)
        default: run(bytes)
        }
    }
}

/// Waits on the current thread for `body`, run as a task.
func blocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await body()
        done.signal()
    }
    done.wait()
}

/// Inputs the seed corpora need that only Swift can make.
package enum FuzzSeeds {
    /// A valid assertion signed with the `saml` target's test key.
    package static func signedSAMLAssertion() throws -> String { try SAMLTarget.signedSample() }
}
