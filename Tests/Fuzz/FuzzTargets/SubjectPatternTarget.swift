import Foundation
import MidtierCore
import PrincipalPropagation

/// `subject-pattern`: a `subjectPattern` as the configuration gives it and a user's values as
/// sign-in gives them (users.json attributes, JWT claims — outside bytes), filled in and made
/// into a certificate by the fuzz CA (FuzzKeys), as `PrincipalPropagation` does per call. The
/// input is the pattern, a NUL, then the user's id; every other variable gets the same value.
///
/// The CA is loaded for each input rather than kept in a static: swift-certificates keeps
/// keys in enums whose cases Swift marks in a pointer's spare bits, which LeakSanitizer cannot
/// follow, so a CA kept for the whole run reads as a leak at exit (977 bytes, once).
enum SubjectPatternTarget {
    static func run(_ bytes: [UInt8]) {
        guard let standard = try? SubjectPattern("CN=${name}"),
            let authority = try? UserCertificateAuthority(
                PrincipalPropagationSettings(
                    mode: .header, subjectPattern: standard, validityMinutes: 10,
                    caCertificatePEM: Array(FuzzKeys.samlCertificatePEM.utf8), caKeyPEM: Array(FuzzKeys.samlKeyPEM.utf8), caKeyPassphrase: nil))
            // The fuzz binary's own test key, not its input: a broken key stops the fuzz run, as it should.
        else { fatalError("the subject-pattern target's CA does not load") }
        let split = bytes.firstIndex(of: 0) ?? bytes.endIndex
        let pattern = String(decoding: bytes[..<split], as: UTF8.self)
        let value = split < bytes.endIndex ? String(decoding: bytes[(split + 1)...], as: UTF8.self) : ""
        guard let parsed = try? SubjectPattern(pattern),
            let subject = try? parsed.fill(userID: value, attributes: ["mail": value, "display_name": value], userIdSource: nil)
        else { return }
        _ = try? authority.issue(subject: subject, now: Date(timeIntervalSince1970: 1_800_000_000))
    }
}
