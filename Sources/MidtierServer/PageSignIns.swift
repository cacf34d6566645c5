import Callers
import DeviceAuthentication
import MidtierCore
import MidtierHTTP
import WebPages

/// Sign-in to the self-service page with the device API's rules and the configuration in
/// force: a `users.json` name and password (the Basic authenticator, its throttle and queue),
/// or a token of an issuer a jwt app trusts.
struct PageSignIns: PageSignIn {
    let signIn: CurrentSignIn

    func signIn(user: String, password: String, client: String?) async throws(Refusal) -> PageSignInResult {
        let current = signIn.current
        switch await current.basicAuthenticator.authenticate(user: user, password: password, client: client) {
        case .success(let signedIn):
            guard let stamp = stamp(of: signedIn.identity, in: current) else { throw CallerSignIn.refusal(.invalidCredentials) }
            return PageSignInResult(user: signedIn.identity, stamp: stamp)
        case .failure(let failure):
            throw CallerSignIn.refusal(failure)
        }
    }

    func signIn(token: String) async throws(Refusal) -> PageSignInResult {
        let current = signIn.current
        let signedIn = try await current.authenticateBearer("Bearer " + token)
        guard let stamp = stamp(of: signedIn.identity, in: current) else { throw Refusal.bearerUnauthorized("the token's issuer is not accepted") }
        return PageSignInResult(user: signedIn.identity, stamp: stamp, expiresAt: signedIn.expiresAt)
    }

    var takesTokens: Bool { !signIn.current.jwtAuthenticators.isEmpty }

    func stamp(of user: UserIdentity) -> String? { stamp(of: user, in: signIn.current) }

    /// A `users.json` user's password hash (a new password ends their sessions); a JWT user's
    /// issuer while a jwt app still trusts it.
    private func stamp(of user: UserIdentity, in signIn: CallerSignIn) -> String? {
        if user.isLocal { return signIn.basicAuthenticator.user(exactly: user.id).map { "users.json " + $0.passwordHash } }
        let trusted = signIn.jwtAuthenticators.values.contains { UserIdentity.sameBytes($0.settings.issuer, user.realm) }
        return trusted ? "issuer " + user.realm : nil
    }
}
