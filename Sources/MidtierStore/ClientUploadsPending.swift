// TEMPORARY while the SQLite and PostgreSQL stores gain client uploads (issue 23, item 6):
// lets the routes build against the protocol. Deleted in the commit that implements them.
extension StateStore {
    package func saveClientUpload(_ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
                                  now: Int64) async throws(StoreError) -> ClientUploadSave { throw StoreError("client uploads are not stored yet") }
    package func clientLogs(matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
                            limit: Int) async throws(StoreError) -> [ClientLogRecord] { throw StoreError("client uploads are not stored yet") }
    package func clientUploads(_ kind: ClientUploadKind, matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
                               limit: Int) async throws(StoreError) -> [ClientUpload] { throw StoreError("client uploads are not stored yet") }
    package func purgeClientUploads(receivedBefore cutoff: Int64) async throws(StoreError) -> Int { throw StoreError("client uploads are not stored yet") }
}
