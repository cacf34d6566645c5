import MidtierJSON

/// `json`: the strict JSON reader every JSON body goes through (StrictJSON), then the writer
/// and the key sorting the server applies to what it read.
enum JSONTarget {
    static func run(_ bytes: [UInt8]) {
        guard case .success(let value) = StrictJSON.value(bytes) else { return }
        _ = value.serialized()
        _ = value.sortedByKey.serialized()
        if case .success(let object) = StrictJSON.object(bytes) { _ = object.count }
    }
}
