import Foundation
import MidtierCore
import Testing

@Suite struct WallClockTests {
    @Test func aStoodClockSaysWhatItIsGiven() {
        let clock = WallClock { 1_800_000_000_123 }
        #expect(clock.now() == 1_800_000_000_123)
    }

    @Test func theSystemClockIsTheSystemsTime() {
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let now = WallClock.system.now()
        #expect(now >= before && now <= Int64(Date().timeIntervalSince1970 * 1000))
    }
}
