import MidtierCore
import NIOSSL
import PostgresNIO

extension PostgresLocation {
    /// The TLS settings `sslmode` and `sslrootcert` ask for, as libpq reads them: `require`
    /// encrypts without checking the certificate, `verify-ca` checks the chain, `verify-full`
    /// the chain and the host name.
    var tlsConfiguration: TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch tls {
        case .disable, .prefer, .require:
            configuration.certificateVerification = .none
        case .verifyCA:
            configuration.certificateVerification = .noHostnameVerification
        case .verifyFull:
            configuration.certificateVerification = .fullVerification
        }
        if let rootCertificatePath { configuration.trustRoots = .file(rootCertificatePath) }
        return configuration
    }

    /// postgres-nio's pool configuration for this location.
    var clientConfiguration: PostgresClient.Configuration {
        let tlsMode: PostgresClient.Configuration.TLS =
            switch tls {
            case .disable: .disable
            case .prefer: .prefer(tlsConfiguration)
            case .require, .verifyCA, .verifyFull: .require(tlsConfiguration)
            }
        var configuration =
            if isUnixSocket {
                PostgresClient.Configuration(unixSocketPath: "\(host)/.s.PGSQL.\(port)", username: user, password: password, database: database)
            } else {
                PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tlsMode)
            }
        configuration.options.connectTimeout = .seconds(3)
        configuration.options.maximumConnections = 10
        configuration.options.keepAliveBehavior = .init(frequency: .seconds(10))
        return configuration
    }
}

extension PostgresLocation {
    /// postgres-nio's single-connection configuration (the change feed's listener).
    var connectionConfiguration: PostgresConnection.Configuration {
        get throws {
            if isUnixSocket {
                return PostgresConnection.Configuration(
                    unixSocketPath: "\(host)/.s.PGSQL.\(port)", username: user, password: password, database: database)
            }
            let tlsMode: PostgresConnection.Configuration.TLS =
                switch tls {
                case .disable: .disable
                case .prefer: .prefer(try NIOSSLContext(configuration: tlsConfiguration))
                case .require, .verifyCA, .verifyFull: .require(try NIOSSLContext(configuration: tlsConfiguration))
                }
            var configuration = PostgresConnection.Configuration(
                host: host, port: port, username: user, password: password, database: database, tls: tlsMode)
            configuration.options.connectTimeout = .seconds(3)
            return configuration
        }
    }
}
