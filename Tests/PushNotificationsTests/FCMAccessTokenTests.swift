import Testing

@testable import PushNotifications

/// How long an FCM access token is used (docs/push.md, "Tokens of the push services"): until a
/// minute before Google says it expires, a tenth of its life before for a short one — never for
/// no time at all (a token per message), never past its end, an hour when the answer does not
/// say, at most a day however long an answer claims.
@Suite struct FCMAccessTokenTests {
    @Test func keptUntilShortlyBeforeItExpires() {
        #expect(FCMClient.keptFor(expiresIn: 3599) == .seconds(3539))
        #expect(FCMClient.keptFor(expiresIn: nil) == .seconds(3540))
        #expect(FCMClient.keptFor(expiresIn: 12) == .milliseconds(10_800))
        #expect(FCMClient.keptFor(expiresIn: 600) == .seconds(540))
    }

    @Test func oddLifetimesAreBounded() {
        #expect(FCMClient.keptFor(expiresIn: 0) == .milliseconds(900))
        #expect(FCMClient.keptFor(expiresIn: -30) == .milliseconds(900))
        #expect(FCMClient.keptFor(expiresIn: .infinity) == .seconds(3540))
        #expect(FCMClient.keptFor(expiresIn: 1e12) == .seconds(86_400 - 60))
    }
}
