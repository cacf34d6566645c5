import Foundation
import MidtierTestSupport

// The Upstream* tests here call these helpers of MidtierTestSupport without importing it;
// these forward to them until those tests move to a target of their own.

func listenOnLoopback() -> (socket: Int32, port: Int) {
    MidtierTestSupport.listenOnLoopback()
}

func makeTemporaryDirectory() throws -> String {
    try MidtierTestSupport.makeTemporaryDirectory()
}

func removeTemporaryDirectory(_ path: String) {
    MidtierTestSupport.removeTemporaryDirectory(path)
}

func runOffThePool(_ executable: String, _ arguments: [String], input: Data? = nil) async throws -> (status: Int32, output: String) {
    try await MidtierTestSupport.runOffThePool(executable, arguments, input: input)
}
