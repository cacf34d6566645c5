package import DeviceProxy
package import Hummingbird
package import Logging
package import MidtierHTTP
package import Registrations

/// Midtier's own routes on the device listener (docs/device-api.md): onboarding (the
/// registration service, `Connections` and `Endpoints`), discovery and settings, the Storage
/// service, client log and usage uploads, and the self-service API. Every other path is a
/// destination call, which `ProxyHandler` serves.
package struct DeviceAPIRoutes: Sendable {
    let runtime: RuntimeHolder
    let registrations: RegistrationService
    let logger: Logger

    package init(runtime: RuntimeHolder, registrations: RegistrationService, logger: Logger) {
        self.runtime = runtime
        self.registrations = registrations
        self.logger = logger
    }

    package func add(to router: Router<MidtierRequestContext>) {
        RegistrationRoutes(runtime: runtime, registrations: registrations, logger: logger).add(to: router)
        ClientConfigurationRoutes(runtime: runtime).add(to: router)
        StorageRoutes(runtime: runtime, registrations: registrations, logger: logger).add(to: router)
        ClientUploadRoutes(runtime: runtime, registrations: registrations, logger: logger).add(to: router)
        SelfServiceRoutes(runtime: runtime, registrations: registrations, logger: logger).add(to: router)
        PushRegistrationRoutes(runtime: runtime, registrations: registrations, logger: logger).add(to: router)
    }
}
