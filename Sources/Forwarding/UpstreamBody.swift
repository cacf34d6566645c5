package import NIOCore

/// A back end's answer body as it streams, with backpressure: while the device's side has not
/// taken the buffered parts, Midtier stops reading from the back end (and its clock stops).
/// Dropping the body unread closes the back-end connection.
package struct UpstreamBody: AsyncSequence, Sendable {
    package typealias Element = ByteBuffer
    typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, Delegate
    >

    let producer: Producer

    package struct AsyncIterator: AsyncIteratorProtocol {
        var base: Producer.AsyncIterator
        package mutating func next() async throws -> ByteBuffer? { try await base.next() }
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: producer.makeAsyncIterator()) }

    /// Tells the connection's handler (on its event loop) when the consumer wants more or has
    /// gone; the exchange says which call the news is about, as the connection serves many.
    struct Delegate: NIOAsyncSequenceProducerDelegate {
        let handler: NIOLoopBound<UpstreamChannelHandler>
        let exchange: NIOLoopBound<UpstreamExchange>

        func produceMore() {
            let handler = handler, exchange = exchange
            handler.eventLoop.execute { handler.value.consumerWantsMore(of: exchange.value) }
        }

        func didTerminate() {
            let handler = handler, exchange = exchange
            handler.eventLoop.execute { handler.value.consumerLeft(exchange.value) }
        }
    }

    /// A body and the source the handler feeds it from.
    static func make(
        handler: UpstreamChannelHandler, exchange: UpstreamExchange, loop: any EventLoop
    )
        -> (body: UpstreamBody, source: Producer.Source)
    {
        let made = Producer.makeSequence(
            backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
            finishOnDeinit: true,
            delegate: Delegate(handler: NIOLoopBound(handler, eventLoop: loop), exchange: NIOLoopBound(exchange, eventLoop: loop))
        )
        return (UpstreamBody(producer: made.sequence), made.source)
    }
}
