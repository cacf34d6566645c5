/// How long Midtier waits for a slow client, and how many connections one client address may
/// hold open, on each listener (docs/operations.md, "Slow and idle clients"; the keys in
/// docs/configuration.md).
package struct ConnectionLimits: Sendable, Equatable {
    /// `requestHeadTimeoutSeconds`: the time a client has to send a whole request head, from
    /// the connection's opening (or, on a kept-alive connection, from the head's first bytes).
    /// Default 20.
    package var requestHeadSeconds: Int
    /// `idleTimeoutSeconds`: how long a kept-alive connection may wait for its next request
    /// after an answer. Default 75.
    package var idleSeconds: Int
    /// `requestBodyTimeoutSeconds`: how long a request body may make no progress while Midtier
    /// waits for it. Default 30.
    package var requestBodySeconds: Int
    /// `maxConnectionsPerAddress`: the most connections open at once from one IPv4 address or
    /// one IPv6 /64; on `listen`, `trustedProxies` are not counted. Default 100.
    package var maxConnectionsPerAddress: Int

    package init(
        requestHeadSeconds: Int = 20, idleSeconds: Int = 75, requestBodySeconds: Int = 30,
        maxConnectionsPerAddress: Int = 100
    ) {
        self.requestHeadSeconds = requestHeadSeconds
        self.idleSeconds = idleSeconds
        self.requestBodySeconds = requestBodySeconds
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
    }
}
