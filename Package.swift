// swift-tools-version:6.2
// Midtier: a self-hosted mobile-services middle tier. See README.md and docs/.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    // Imports say what a module really uses (as Hummingbird's Package.swift has them).
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "midtier",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "midtier", targets: ["midtier"]),
        .executable(name: "midtier-sandbox", targets: ["midtier-sandbox"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // The HTTP parts between Hummingbird's HTTP/1 codec and its handlers (MidtierHTTP's
        // ConnectionGuard); already in the graph through Hummingbird.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.34.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
        // HTTP/2 stream errors: a request a push service's GOAWAY refused (already in the graph
        // through async-http-client).
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        // Users' certificates for principal propagation (already in the graph through jwt-kit).
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // jwt-kit needs ≥ 4.1.0 (../shared/TOOLCHAIN.md); AES-GCM for back-end sessions.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        // base64 and base64url, one encoder (already in the graph through jwt-kit).
        .package(url: "https://github.com/swift-extras/swift-extras-base64.git", from: "1.2.0"),
        // Client log uploads arrive zipped or as multipart/form-data (docs/device-api.md,
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
        // Traces (docs/operations.md, "Traces"): OpenTelemetry over OTLP/HTTP only (the gRPC
        // exporter's trait stays off: it would bring grpc-swift into the build).
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // W3C trace context values (already in the graph through swift-otel).
        .package(url: "https://github.com/swift-otel/swift-w3c-trace-context.git", from: "1.0.0"),
    ],
    targets: [
        // C libraries from the system, through pkg-config.
        .systemLibrary(name: "CLibXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libarchive: the zip reader for uploaded client logs, built for hostile input
        // (docs/reliability.md, "Zip archives").
        .systemLibrary(name: "CLibArchive", pkgConfig: "libarchive", providers: [.apt(["libarchive-dev"])]),

        // JSON: one value type, the strict reader (RFC 8259, errors that say where) and the
        // one writer every JSON answer goes through; no dependencies.
        .target(
            name: "MidtierJSON",
            dependencies: [],
            swiftSettings: swiftSettings
        ),
        // The domain's core types: who a user is (realm + id, compared by bytes), apps,
        // destinations, the configuration they make up.
        .target(
            name: "MidtierCore",
            dependencies: ["MidtierJSON"],
            swiftSettings: swiftSettings
        ),
        // Configuration files: reading and validating them into the core's values (file/key
        // errors, secrets).
        .target(
            name: "ConfigurationFiles",
            dependencies: [
                "MidtierJSON", "MidtierCore", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // SAML 2.0 assertions, XML-DSig signing and verification (libxml2 + OpenSSL).
        .target(
            name: "SAMLSigning",
            dependencies: ["CLibXML2", "COpenSSL"],
            swiftSettings: swiftSettings
        ),
        // Principal propagation: users' short-lived X.509 certificates from the operator's CA,
        // and their per-user cache (docs/forwarding.md, "PrincipalPropagation").
        .target(
            name: "PrincipalPropagation",
            dependencies: [
                "MidtierCore", "COpenSSL",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        // OAuth2 SAML bearer exchange and the per-(destination, user) token cache.
        // Traces of device requests (OpenTelemetry, W3C trace context): the request's trace
        // as a task-local, its spans, the OTLP exporter (docs/operations.md, "Traces").
        .target(
            name: "RequestTracing",
            dependencies: [
                "MidtierCore",
                .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TokenExchange",
            dependencies: [
                "MidtierJSON", "SAMLSigning", "MidtierCore", "RequestTracing",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Device authentication: HTTP Basic against users.json, bcrypt, verified-credential cache.
        .target(
            name: "DeviceAuthentication",
            dependencies: [
                "MidtierJSON", "MidtierCore", "COpenSSL", "RequestTracing",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Registrations (device onboarding) and the rules that decide whether one may call.
        .target(
            name: "Registrations",
            dependencies: ["MidtierStore", "MidtierCore"],
            swiftSettings: swiftSettings
        ),
        // Durable state: registrations, blocks, audit (SQLite through GRDB, or PostgreSQL
        // through postgres-nio for several instances).
        .target(
            name: "MidtierStore",
            dependencies: [
                "MidtierJSON", "MidtierCore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The back ends' session cookies per registration and destination: memory, and sealed
        // (AES-GCM) copies in the store that every instance continues.
        .target(
            name: "BackendSessions",
            dependencies: [
                "MidtierJSON", "MidtierStore", "MidtierCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Client log and usage uploads: SAP's log line format read from plain, zipped or
        // multipart bodies, usage reports checked as JSON.
        .target(
            name: "ClientUploads",
            dependencies: [
                "MidtierJSON", "MidtierStore", "MidtierCore", "CLibArchive",
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Push notifications: SAP's notification object, what APNs and FCM are sent, their
        // clients (HTTP/2, JWT provider and service-account tokens) and the delivery worker.
        .target(
            name: "PushNotifications",
            dependencies: [
                "MidtierJSON", "MidtierCore", "MidtierStore", "MidtierMetrics",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The callers of the device listener (docs/identity.md): how devices and push senders
        // sign in, which registration a call acts for and whether it may, onboarding.
        .target(
            name: "Callers",
            dependencies: [
                "MidtierJSON", "MidtierCore", "MidtierStore", "MidtierHTTP", "Registrations", "DeviceAuthentication", "RequestTracing",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // SAP's Notification Backend API: back-end senders' routes on the device listener.
        .target(
            name: "PushAPI",
            dependencies: [
                "MidtierJSON", "MidtierCore", "MidtierStore", "MidtierHTTP", "Registrations", "Callers", "DeviceAuthentication",
                "PushNotifications",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // $metadata facet patches (libxml2).
        .target(
            name: "MetadataPatching",
            dependencies: ["CLibXML2", "MidtierCore"],
            swiftSettings: swiftSettings
        ),
        // Forwarding to back ends: path safety, header hygiene, pooled NIO HTTP/1 connections.
        .target(
            name: "Forwarding",
            dependencies: [
                "MidtierCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // Prometheus metrics through swift-metrics.
        .target(
            name: "MidtierMetrics",
            dependencies: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        // What both listeners share: the request context and OData-style refusals.
        .target(
            name: "MidtierHTTP",
            dependencies: [
                "MidtierJSON", "MidtierCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The admin operations, one set for the admin API and the console (docs/admin.md): users,
        // blocks, registrations, tokens, reload, client uploads; the admin token check.
        .target(
            name: "Administration",
            dependencies: [
                "MidtierHTTP", "Registrations", "MidtierStore", "TokenExchange", "DeviceAuthentication", "MidtierCore", "PushNotifications",
                "MidtierJSON",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        // The admin API (adminListen): JSON routes over the admin operations.
        .target(
            name: "AdminAPI",
            dependencies: [
                "MidtierJSON", "Administration", "MidtierHTTP", "Registrations", "MidtierStore", "TokenExchange", "MidtierCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The pages for people: the admin console (adminListen, /console/) and the self-service
        // page (/mobileservices/me/), server-rendered with swift-mustache, sessions and CSRF.
        .target(
            name: "WebPages",
            dependencies: [
                "MidtierJSON", "Administration", "MidtierHTTP", "Registrations", "MidtierCore", "MidtierMetrics", "MidtierStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The request path (docs/architecture.md): a device's call through a destination, from
        // sign-in and its registration to the back end's answer; the runtime a configuration makes.
        .target(
            name: "DeviceProxy",
            dependencies: [
                "MidtierJSON", "SAMLSigning", "TokenExchange", "DeviceAuthentication", "Registrations", "MidtierStore", "Forwarding",
                "MidtierHTTP", "MidtierMetrics", "MetadataPatching", "MidtierCore", "BackendSessions", "RequestTracing",
                "PrincipalPropagation", "Callers",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        // The device API (docs/device-api.md): onboarding, discovery and settings, the Storage
        // service, client log and usage uploads, self-service.
        .target(
            name: "DeviceAPI",
            dependencies: [
                "MidtierJSON", "Callers", "SAMLSigning", "DeviceAuthentication", "Registrations", "MidtierStore", "MidtierHTTP",
                "MidtierCore", "ClientUploads",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        // The server: both listeners wired (device: the device API and the request path; admin:
        // the admin API and the console), the store opened, reloads, background services.
        .target(
            name: "MidtierServer",
            dependencies: [
                "PushNotifications", "PushAPI", "MidtierJSON", "ConfigurationFiles", "SAMLSigning", "TokenExchange", "DeviceAuthentication",
                "Registrations", "MidtierStore", "Forwarding", "MidtierHTTP", "Administration", "AdminAPI", "MidtierMetrics",
                "MidtierCore", "BackendSessions", "WebPages", "DeviceProxy", "DeviceAPI", "RequestTracing", "PrincipalPropagation",
                "Callers",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // A local stand-in for SuccessFactors: /oauth/token and an OData v2 payroll service.
        .target(
            name: "SuccessFactorsSandbox",
            dependencies: [
                "MidtierJSON", "SAMLSigning", "MidtierCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The `midtier` command line.
        .executableTarget(
            name: "midtier",
            dependencies: [
                "MidtierServer", "ConfigurationFiles", "SAMLSigning",
                "DeviceAuthentication", "TokenExchange", "MetadataPatching", "MidtierCore", "RequestTracing", "PrincipalPropagation",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The SuccessFactors sandbox as its own program (docs/sandbox.md): the server does not
        // link it.
        .executableTarget(
            name: "midtier-sandbox",
            dependencies: [
                "SuccessFactorsSandbox", "SAMLSigning",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Measurements for the benchmark scripts (Benchmarks/run.sh); not part of the product.
        .executableTarget(
            name: "midtier-bench",
            dependencies: [
                "DeviceAuthentication", "Forwarding", "MidtierCore", "MidtierServer", "MidtierStore", "SAMLSigning", "TokenExchange",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/MidtierBench",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushNotificationsTests",
            dependencies: [
                "PushNotifications", "MidtierCore", "MidtierJSON", "MidtierStore", "MidtierTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RequestTracingTests",
            dependencies: [
                "RequestTracing",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
            ], swiftSettings: swiftSettings),
        .testTarget(name: "MidtierJSONTests", dependencies: ["MidtierJSON"], swiftSettings: swiftSettings),
        .testTarget(name: "MidtierCoreTests", dependencies: ["MidtierCore"], swiftSettings: swiftSettings),
        .testTarget(name: "MidtierMetricsTests", dependencies: ["MidtierMetrics"], swiftSettings: swiftSettings),
        .testTarget(
            name: "RegistrationsTests", dependencies: ["Registrations", "MidtierCore", "MidtierStore", "MidtierTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "PrincipalPropagationTests", dependencies: ["PrincipalPropagation", "MidtierCore", "MidtierTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ConfigurationTests",
            dependencies: [
                "MidtierJSON", "ConfigurationFiles", "MidtierCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ], swiftSettings: swiftSettings),
        // Used only by the test targets below (not part of the midtier product): the
        // in-process Midtier with its sandbox and echo back end, the SQLite and PostgreSQL
        // test stores, test keys and small process and socket helpers.
        .target(
            name: "MidtierTestSupport",
            dependencies: [
                "ConfigurationFiles", "DeviceAuthentication", "MidtierCore", "MidtierServer", "MidtierStore", "SuccessFactorsSandbox",
                "CLibArchive", "MidtierHTTP",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/MidtierTestSupport",
            swiftSettings: swiftSettings
        ),
        // One test target per module it tests (Tests/<Module>Tests), and MidtierServerTests for
        // the tests that start Midtier in process and call it over real sockets.
        .testTarget(
            name: "AdminAPITests",
            dependencies: [
                "AdminAPI", "Administration", "MidtierCore", "MidtierJSON", "MidtierServer", "MidtierStore", "MidtierTestSupport",
                "Registrations",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ], swiftSettings: swiftSettings),
        .testTarget(
            name: "BackendSessionsTests",
            dependencies: [
                "BackendSessions", "MidtierCore", "MidtierStore", "MidtierTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: swiftSettings),
        .testTarget(name: "ClientUploadsTests", dependencies: ["ClientUploads", "MidtierStore", "MidtierTestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "DeviceAuthenticationTests",
            dependencies: [
                "DeviceAuthentication", "MidtierCore", "MidtierTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings),
        // Forwarding: the header policy, URL rewriting, redaction, and the connection pool to
        // the back ends (its Upstream* types) over NIO's embedded channels and loopback sockets.
        .testTarget(
            name: "ForwardingTests",
            dependencies: [
                "Forwarding", "MidtierCore", "MidtierTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ], swiftSettings: swiftSettings),
        .testTarget(
            name: "CallersTests",
            dependencies: [
                "Callers", "DeviceAuthentication", "MidtierCore", "MidtierHTTP", "MidtierJSON", "MidtierStore", "MidtierTestSupport",
                "Registrations",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ], swiftSettings: swiftSettings),
        // The device API: its reading of requests alone, and its routes through the server.
        .testTarget(
            name: "DeviceAPITests",
            dependencies: [
                "ConfigurationFiles", "DeviceAPI", "MidtierCore", "MidtierHTTP", "MidtierJSON", "MidtierServer", "MidtierStore",
                "MidtierTestSupport", "Registrations",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ], swiftSettings: swiftSettings),
        // SAP's Notification Backend API: how a sender's call is read.
        .testTarget(
            name: "PushAPITests",
            dependencies: ["PushAPI", "MidtierCore", "MidtierHTTP", "MidtierJSON", "MidtierStore", "MidtierTestSupport"],
            swiftSettings: swiftSettings),
        // The command line (the executable's own module).
        .testTarget(
            name: "midtierTests",
            dependencies: ["midtier", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings),
        // The admin operations on their own, one set for the API and the console.
        .testTarget(
            name: "AdministrationTests",
            dependencies: [
                "Administration", "MidtierCore", "MidtierHTTP", "MidtierStore", "MidtierTestSupport", "Registrations", "TokenExchange",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: swiftSettings),
        .testTarget(
            name: "DeviceProxyTests",
            dependencies: [
                "DeviceProxy", "MidtierHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ], swiftSettings: swiftSettings),
        .testTarget(
            name: "MetadataPatchingTests",
            dependencies: [
                "MetadataPatching", "Forwarding", "MidtierCore",
                .product(name: "NIOCore", package: "swift-nio"),
            ], swiftSettings: swiftSettings),
        .testTarget(
            name: "MidtierHTTPTests",
            dependencies: [
                "MidtierHTTP", "MidtierCore", "MidtierStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: swiftSettings),
        .testTarget(
            name: "MidtierStoreTests",
            dependencies: [
                "MidtierStore", "MidtierCore", "Registrations", "MidtierTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: swiftSettings),
        .testTarget(name: "SAMLSigningTests", dependencies: ["SAMLSigning", "MidtierTestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "TokenExchangeTests",
            dependencies: ["TokenExchange", "MidtierCore", "MidtierTestSupport", .product(name: "AsyncHTTPClient", package: "async-http-client")],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "WebPagesTests",
            dependencies: [
                "Administration", "MidtierCore", "MidtierHTTP", "MidtierServer", "MidtierStore", "MidtierTestSupport",
                "Registrations", "WebPages",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ], swiftSettings: swiftSettings),
        .testTarget(
            name: "MidtierServerTests",
            dependencies: [
                "DeviceAuthentication", "Forwarding", "MetadataPatching", "MidtierCore", "MidtierHTTP", "MidtierJSON",
                "MidtierServer", "MidtierStore", "MidtierTestSupport", "Registrations", "SAMLSigning", "SuccessFactorsSandbox", "TokenExchange",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], swiftSettings: swiftSettings),
        // The sandbox's OData service and token service (the stand-in the other tests call).
        .testTarget(name: "SandboxODataTests", dependencies: ["SuccessFactorsSandbox"], swiftSettings: swiftSettings),
        // Fuzzing (docs/reliability.md, "Fuzzing"): one function per parser that reads device or
        // back-end bytes, the libFuzzer binary (`make fuzz`; a replayer in the normal build), and
        // the tests that run every seed and crasher through the functions.
        .target(
            name: "FuzzTargets",
            dependencies: [
                "MidtierJSON", "MidtierCore", "ClientUploads", "Forwarding", "DeviceAPI", "Callers",
                "Registrations", "SAMLSigning", "PushNotifications", "DeviceAuthentication", "TokenExchange", "BackendSessions",
                "MetadataPatching", "ConfigurationFiles", "PrincipalPropagation", "PushAPI",
            ],
            path: "Tests/Fuzz/FuzzTargets",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "midtier-fuzz",
            dependencies: ["FuzzTargets"],
            path: "Tests/Fuzz/MidtierFuzz",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "FuzzTargetsTests", dependencies: ["FuzzTargets"], swiftSettings: swiftSettings),
    ]
)
