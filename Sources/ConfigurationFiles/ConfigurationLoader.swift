import Foundation
package import MidtierCore
import MidtierJSON

/// Loads and validates a configuration directory (docs/configuration.md):
///
/// - `<dir>/midtier.json` (required),
/// - `<dir>/apps/*.json` (the file name without `.json` is the app id; none at all is fine),
/// - `<dir>/destinations/*.json` (`Name` equals the file name without `.json`),
/// - `<dir>/users.json` (required only when an app uses `basic` authentication),
/// - `<dir>/push-senders.json` (optional; none means no back end may send push notifications).
///
/// Hidden files and files not ending in `.json` are ignored. Problems name files as
/// `<dir>/…`, joined from the directory string given (without doubling a trailing slash).
/// Relative paths inside the files (key and certificate files, a JWKS file, secret files)
/// resolve against the process working directory, not against the configuration directory.
package struct ConfigurationLoader: Sendable {
    /// The configuration directory, as given.
    package let directory: String
    let environment: [String: String]
    let validateSigningMaterial: (@Sendable (SAMLBearerSettings) -> (key: String, message: String)?)?
    /// Checks a destination's key material that only other modules can load
    /// (`KeyStoreLocation`, the principal-propagation CA): nil when it loads, else the key and
    /// what is wrong.
    let validateDestination: (@Sendable (DestinationConfiguration) -> (key: String, message: String)?)?

    /// `validateSigningMaterial` is called for each OAuth2SAMLBearerAssertion destination after
    /// its files are read; it returns nil when the key loads and matches the certificate, else
    /// a message for the key `signingKey`/`signingCertificate`.
    package init(
        directory: String,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        validateSigningMaterial: (@Sendable (SAMLBearerSettings) -> (key: String, message: String)?)? = nil,
        validateDestination: (@Sendable (DestinationConfiguration) -> (key: String, message: String)?)? = nil
    ) {
        self.validateDestination = validateDestination
        self.directory = directory
        self.environment = environment
        self.validateSigningMaterial = validateSigningMaterial
    }

    /// Loads and validates everything; collects all problems across all files before throwing.
    package func load() throws(ConfigurationErrors) -> MidtierConfiguration {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else {
            throw ConfigurationErrors(problems: [
                ConfigProblem(file: directory, key: "", message: "configuration directory not found")
            ])
        }
        guard isDirectory.boolValue else {
            throw ConfigurationErrors(problems: [
                ConfigProblem(file: directory, key: "", message: "is not a directory (give the configuration directory)")
            ])
        }
        var problems: [ConfigProblem] = []

        // midtier.json
        let serverFile = FileProblems(file: joinPath(directory, "midtier.json"))
        var server: ServerSettings?
        if let reader = openObject(serverFile, required: true) {
            server = loadServerSettings(reader)
        }
        problems += serverFile.problems

        // destinations/*.json
        var destinations: [String: DestinationConfiguration] = [:]
        let destinationFiles = listFiles("destinations", problems: &problems)
        for (name, path) in destinationFiles {
            let file = FileProblems(file: path)
            if let reader = openObject(file, required: true),
                let destination = loadDestination(reader, fileName: name), file.isEmpty
            {
                destinations[name] = destination
            }
            problems += file.problems
        }

        // apps/*.json
        var apps: [String: AppConfiguration] = [:]
        var basicApps: [String] = []
        let definedDestinations = Set(destinationFiles.map(\.name))
        let appFiles = listFiles("apps", problems: &problems)
        for (id, path) in appFiles {
            let file = FileProblems(file: path)
            if !isPlainName(id, extra: [".", "_", "-"]) {
                file.add("", "the file name must be an app id of letters, digits, '.', '_' and '-' followed by .json")
            }
            if let reader = openObject(file, required: true) {
                let (app, usesBasic) = loadApp(reader, id: id, definedDestinations: definedDestinations)
                if usesBasic { basicApps.append(id) }
                if let app, file.isEmpty { apps[id] = app }
            }
            problems += file.problems
        }
        problems += userClaimConflicts(apps)
        // A backend app sends passwords to its destination: only over https (or to this host).
        for (id, app) in apps {
            guard case .backend(let signIn) = app.authentication, let destination = destinations[signIn.destination] else { continue }
            let file = joinPath(joinPath(directory, "apps"), id + ".json")
            // The check must ask the password alone: a client certificate would answer for it.
            if destination.clientIdentity != nil {
                problems.append(
                    ConfigProblem(
                        file: file, key: "authentication.destination",
                        message: "destination \"\(signIn.destination)\" presents a client certificate (KeyStoreLocation), which "
                            + "a back end might let sign in whatever the password; check with a destination without one"))
            }
            if !isHTTPSOrLoopback(destination.url) {
                problems.append(
                    ConfigProblem(
                        file: joinPath(joinPath(directory, "apps"), id + ".json"), key: "authentication.destination",
                        message: "destination \"\(signIn.destination)\" is not https: users' passwords would cross the network in clear"))
            }
        }

        // users.json
        let usersFile = FileProblems(file: joinPath(directory, "users.json"))
        var users: [String: LocalUser] = [:]
        if let reader = openObject(usersFile, required: false, requiredBecause: requiredBecause(basicApps)) {
            users = loadUsers(reader) ?? [:]
        }
        problems += usersFile.problems

        // push-senders.json
        let sendersFile = FileProblems(file: joinPath(directory, "push-senders.json"))
        var pushSenders: [PushSender] = []
        if let reader = openObject(sendersFile, required: false) {
            pushSenders = loadPushSenders(reader, appIDs: Set(appFiles.map { ExactString($0.name) }))
        }
        problems += sendersFile.problems

        guard problems.isEmpty, let server else {
            throw ConfigurationErrors(problems: problems)
        }
        return MidtierConfiguration(server: server, apps: apps, destinations: destinations, users: users, pushSenders: pushSenders)
    }

    /// Why `users.json` must exist, or nil when no app needs it.
    private func requiredBecause(_ basicApps: [String]) -> String? {
        guard !basicApps.isEmpty else { return nil }
        let names = basicApps.map { "\"\($0)\"" }.joined(separator: ", ")
        return "required because \(basicApps.count == 1 ? "app" : "apps") \(names) \(basicApps.count == 1 ? "uses" : "use") basic authentication"
    }

    /// The `*.json` files of a subdirectory as (name without `.json`, path). A missing
    /// subdirectory is simply empty.
    private func listFiles(_ subdirectory: String, problems: inout [ConfigProblem]) -> [(name: String, path: String)] {
        let path = joinPath(directory, subdirectory)
        switch listJSONFiles(in: path) {
        case .missing:
            return []
        case .notADirectory:
            problems.append(ConfigProblem(file: path, key: "", message: "must be a directory of .json files"))
            return []
        case .files(let names):
            return names.map { (String($0.dropLast(5)), joinPath(path, $0)) }
        }
    }

    /// Reads and parses one file and returns a reader for its top-level object, or nil after
    /// recording a file-level problem (missing, unreadable, not JSON, not an object).
    /// Duplicate keys are recorded with their key paths; the first occurrence is used.
    func openObject(_ file: FileProblems, required: Bool, requiredBecause reason: String? = nil) -> ObjectReader? {
        let bytes: [UInt8]
        switch readFile(file.file) {
        case .success(let contents):
            bytes = contents
        case .failure(let error) where error.isMissing:
            if required {
                file.add("", "required file is missing")
            } else if let reason {
                file.add("", "file is missing; it is \(reason)")
            }
            return nil
        case .failure(let error):
            file.add("", "cannot read the file: \(error.message)")
            return nil
        }
        let parsed = JSONParser.parse(bytes)
        guard let value = parsed.value else {
            file.add("", parsed.error ?? "invalid JSON")
            return nil
        }
        for key in parsed.duplicateKeys {
            file.add(key, "duplicate key (each key may appear only once)")
        }
        guard case .object(let members) = value else {
            file.add("", "the file must contain a JSON object (found \(value.kind))")
            return nil
        }
        return ObjectReader(path: "", members: members, problems: file)
    }
}
