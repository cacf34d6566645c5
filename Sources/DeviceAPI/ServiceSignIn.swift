import Callers
import DeviceAuthentication
import Hummingbird
import MidtierCore
import MidtierHTTP

/// Sign-in on SAP's `/mobileservices/application/{appId}/{service}/…/application/{serviceAppId}/…`
/// paths (the Storage service, the client log and usage uploads; docs/device-api.md): the first
/// app signs the caller in with its method, the second is the app the service works for, and
/// both must be the same app. A path without the second id (MDK's Storage form) names the app
/// once.
enum ServiceSignIn {
    /// The app and its signed-in caller. An unknown second app is 404; two different apps, 403
    /// after sign-in (one app's credentials never reach another's service).
    static func signedIn(
        _ request: Request, _ context: MidtierRequestContext, signIn: CallerSignIn,
        serviceAppParameter: String, service: String
    ) async throws(Refusal) -> (AppConfiguration, AuthenticatedUser) {
        let app = try ClientConfigurationRoutes.app(context, signIn)
        let serviceAppID = context.parameters.get(serviceAppParameter) ?? app.id
        guard signIn.configuration.apps[serviceAppID] != nil else { throw .notFound("unknown application \(serviceAppID)") }
        let user = try await signIn.authenticate(request, app: app, client: context.clientIP)
        guard UserIdentity.sameBytes(serviceAppID, app.id) else {
            throw .forbidden("the \(service) of application \(serviceAppID) cannot be reached through application \(app.id)")
        }
        return (app, user)
    }
}
