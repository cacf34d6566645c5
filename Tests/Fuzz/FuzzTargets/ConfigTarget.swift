import ConfigurationFiles
import Foundation

/// `config`: the configuration readers (ConfigurationLoader) on one file of the demo
/// configuration (config/, copied once to a temporary directory) replaced by the input: the
/// first byte picks the file (midtier.json, users.json, apps/demo.json, destinations/sf.json).
enum ConfigTarget {
    static let files = ["midtier.json", "users.json", "apps/demo.json", "destinations/sf.json"]

    static let directory: String = {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../config").standardizedFileURL
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("midtier-fuzz-config-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try? FileManager.default.copyItem(at: source, to: directory)
        return directory.path
    }()

    static func run(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let name = files[Int(first) % files.count]
        let path = directory + "/" + name
        let original = FileManager.default.contents(atPath: path)
        FileManager.default.createFile(atPath: path, contents: Data(bytes.dropFirst()))
        defer { FileManager.default.createFile(atPath: path, contents: original) }
        _ = try? ConfigurationLoader(directory: directory, environment: [:]).load()
    }
}
