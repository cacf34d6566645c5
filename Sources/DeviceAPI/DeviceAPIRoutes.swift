package import Callers
package import Hummingbird
package import Logging
package import MidtierHTTP

/// Midtier's own routes on the device listener (docs/device-api.md): onboarding (the
/// registration service, `Connections` and `Endpoints`), discovery and settings, the Storage
/// service, client log and usage uploads, and the self-service API. Every other path is a
/// destination call, which `ProxyHandler` serves.
package struct DeviceAPIRoutes: Sendable {
    let signIn: CurrentSignIn
    let callers: Callers
    let logger: Logger

    package init(signIn: CurrentSignIn, callers: Callers, logger: Logger) {
        self.signIn = signIn
        self.callers = callers
        self.logger = logger
    }

    package func add(to router: Router<MidtierRequestContext>) {
        RegistrationRoutes(signIn: signIn, callers: callers, logger: logger).add(to: router)
        ClientConfigurationRoutes(signIn: signIn).add(to: router)
        StorageRoutes(signIn: signIn, callers: callers, logger: logger).add(to: router)
        ClientUploadRoutes(signIn: signIn, callers: callers, logger: logger).add(to: router)
        SelfServiceRoutes(signIn: signIn, callers: callers, logger: logger).add(to: router)
        PushRegistrationRoutes(signIn: signIn, callers: callers, logger: logger).add(to: router)
    }
}
