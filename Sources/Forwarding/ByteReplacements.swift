import Foundation
package import NIOCore

/// Byte strings replaced by others wherever they appear in an answer, as it streams: the one
/// matcher behind URL rewriting (``URLRewriter``) and credential redaction
/// (``CredentialRedaction``), docs/forwarding.md.
///
/// A chunk is searched in place (`memchr` for the first bytes of what is looked for, `memcmp`
/// for the rest); bytes that match nothing are not copied, so a chunk without a match comes
/// back as (a slice of) itself. A tail that could be the start of a match cut by the chunk
/// boundary is held back for the next chunk: a carry-over shorter than the longest string
/// looked for.
package struct ByteReplacements: Sendable {
    struct Replacement: Sendable {
        let from: [UInt8]
        let to: [UInt8]
    }

    /// Tried in this order at each position: where one `from` starts another, list the longer
    /// first.
    let replacements: [Replacement]
    /// The distinct first bytes of the `from`s.
    let firstBytes: [UInt8]

    /// - Parameter pairs: what to replace (never empty) with what, tried in this order.
    init(_ pairs: [(from: [UInt8], to: [UInt8])]) {
        replacements = pairs.filter { !$0.from.isEmpty }.map { Replacement(from: $0.from, to: $0.to) }
        var firstBytes: [UInt8] = []
        for replacement in replacements where !firstBytes.contains(replacement.from[0]) { firstBytes.append(replacement.from[0]) }
        self.firstBytes = firstBytes
    }

    package var isEmpty: Bool { replacements.isEmpty }

    /// Both sets, `first`'s tried before `second`'s at the same position.
    static func + (first: ByteReplacements, second: ByteReplacements) -> ByteReplacements {
        if first.isEmpty { return second }
        if second.isEmpty { return first }
        return ByteReplacements((first.replacements + second.replacements).map { ($0.from, $0.to) })
    }

    /// `chunk` (after the `carry` held back from the previous one) with every match replaced.
    /// Unless `final`, a tail that could be the start of a match cut by the chunk boundary is
    /// held back in `carry` for the next call.
    func replace(_ chunk: ByteBuffer, carry: inout ByteBuffer?, final: Bool) -> ByteBuffer {
        var work = chunk
        if var held = carry {
            carry = nil
            var chunk = chunk
            held.writeBuffer(&chunk)
            work = held
        }
        var output: ByteBuffer?
        let holdFrom = work.withUnsafeReadableBytes { scan($0, final: final, into: &output) }
        if holdFrom < work.readableBytes {
            carry = work.getSlice(at: work.readerIndex + holdFrom, length: work.readableBytes - holdFrom)
        }
        if let output { return output }
        return holdFrom == work.readableBytes ? work : work.getSlice(at: work.readerIndex, length: holdFrom)!
    }

    /// `bytes`, read whole, with every match replaced; nil when there is none (found without
    /// copying).
    func replaced(in bytes: some Collection<UInt8>) -> [UInt8]? {
        guard !isEmpty else { return nil }
        var output: ByteBuffer?
        let scanned: Void? = bytes.withContiguousStorageIfAvailable { _ = scan(UnsafeRawBufferPointer($0), final: true, into: &output) }
        if scanned == nil { _ = Array(bytes).withUnsafeBytes { scan($0, final: true, into: &output) } }
        return output.map { Array($0.readableBytesView) }
    }

    /// `body`, its matches replaced as it streams.
    func replacing<Base: AsyncSequence & Sendable>(_ body: Base) -> ReplacedBody<Base> where Base.Element == ByteBuffer {
        ReplacedBody(base: body, replacements: self)
    }

    /// Writes `bytes` with the matches replaced to `output` (created at the first match; left
    /// nil when there is none) and returns where the held-back tail begins (`bytes.count` for
    /// none).
    private func scan(_ bytes: UnsafeRawBufferPointer, final: Bool, into output: inout ByteBuffer?) -> Int {
        guard let base = bytes.baseAddress, !replacements.isEmpty else { return bytes.count }
        let count = bytes.count
        var copiedUpTo = 0
        var holdFrom = count
        var index = 0
        // Where each first byte next occurs at or after `index` (count: nowhere), so that each
        // is searched for once per stretch of bytes.
        withUnsafeTemporaryAllocation(of: Int.self, capacity: firstBytes.count) { next in
            _ = next.initialize(repeating: -1)
            func candidate() -> Int? {
                var nearest = count
                for (slot, byte) in firstBytes.enumerated() {
                    if next[slot] < index {
                        next[slot] = memchr(base + index, Int32(byte), count - index).map { base.distance(to: UnsafeRawPointer($0)) } ?? count
                    }
                    nearest = min(nearest, next[slot])
                }
                return nearest < count ? nearest : nil
            }
            search: while index < count, let position = candidate() {
                let first = bytes[position]
                for replacement in replacements where replacement.from[0] == first {
                    let length = replacement.from.count
                    if length <= count - position {
                        if memcmp(base + position, replacement.from, length) == 0 {
                            if output == nil { output = ByteBuffer(); output!.reserveCapacity(count + 256) }
                            output!.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[copiedUpTo..<position]))
                            output!.writeBytes(replacement.to)
                            index = position + length
                            copiedUpTo = index
                            continue search
                        }
                    } else if !final, memcmp(base + position, replacement.from, count - position) == 0 {
                        // The start of a match the next chunk may finish.
                        holdFrom = position
                        break search
                    }
                }
                index = position + 1
            }
        }
        if output != nil {
            output!.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[copiedUpTo..<holdFrom]))
        }
        return holdFrom
    }
}

/// A response body with ``ByteReplacements`` applied chunk by chunk.
package struct ReplacedBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    package typealias Element = ByteBuffer
    let base: Base
    let replacements: ByteReplacements

    package struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let replacements: ByteReplacements
        var carry: ByteBuffer?
        var finished = false

        package mutating func next() async throws -> ByteBuffer? {
            while !finished {
                if let chunk = try await base.next() {
                    let output = replacements.replace(chunk, carry: &carry, final: false)
                    if output.readableBytes > 0 { return output }
                } else {
                    finished = true
                    guard let held = carry else { return nil }
                    carry = nil
                    let output = replacements.replace(held, carry: &carry, final: true)
                    if output.readableBytes > 0 { return output }
                }
            }
            return nil
        }
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), replacements: replacements) }
}
