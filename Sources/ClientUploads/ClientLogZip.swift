import CLibArchive

/// The files of a zip archive a device uploaded as its log: every file entry, in the
/// archive's order (directories skipped, anything else refused), within ``ClientLogLimits``.
///
/// Read with libarchive, a reader built for hostile input (docs/reliability.md, "Zip
/// archives"): a damaged archive — offsets past the end, sizes that lie, unknown compression —
/// is an error it reports, never a trap that stops the process.
enum ClientLogZip {
    /// Whether `bytes` starts with a zip's local file header (`PK\x03\x04`).
    static func looksLikeZip(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.starts(with: [0x50, 0x4B, 0x03, 0x04])
    }

    /// The archive's files; `budget` is what may still be inflated, shared with the rest of the
    /// upload, and goes down as the files are read. The budget is checked on every chunk that
    /// comes out of the inflater, so an archive that would inflate past it (a zip bomb) is
    /// stopped after at most one chunk more, whatever its headers claim. Every entry, a
    /// directory too, counts against `maxFiles`.
    static func files(of bytes: [UInt8], limits: ClientLogLimits, budget: inout Int, described what: String) throws(ClientUploadError) -> [[UInt8]] {
        guard let archive = archive_read_new() else { throw .invalid("\(what) cannot be read (no memory for the zip reader)") }
        defer { archive_read_free(archive) }
        archive_read_support_format_zip(archive)
        var room = budget
        // (`withUnsafeBytes` rethrows untyped errors: the closure's typed one comes out as a Result.)
        let read = bytes.withUnsafeBytes { raw in
            Result { () throws(ClientUploadError) -> [[UInt8]] in
                guard archive_read_open_memory(archive, raw.baseAddress, raw.count) == ARCHIVE_OK else {
                    throw .invalid("\(what) is not a readable zip archive")
                }
                var files: [[UInt8]] = []
                var chunk = [UInt8](repeating: 0, count: 16 * 1024)
                var index = 0
                while true {
                    var entry: OpaquePointer?
                    let status = archive_read_next_header(archive, &entry)
                    if status == ARCHIVE_EOF { break }
                    guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let entry else {
                        throw .invalid(index == 0 ? "\(what) is not a readable zip archive" : "\(what) is damaged after entry \(index)")
                    }
                    index += 1
                    guard index <= limits.maxFiles else { throw .tooLarge("\(what) holds more than \(limits.maxFiles) files") }
                    switch archive_entry_filetype(entry) {
                    case midtier_archive_directory(): continue
                    case midtier_archive_regular_file(): break
                    default: throw .invalid("\(what) holds a link or a special file (entry \(index)); only files are read")
                    }
                    var file: [UInt8] = []
                    while true {
                        let count = chunk.withUnsafeMutableBytes { archive_read_data(archive, $0.baseAddress, $0.count) }
                        if count == 0 { break }
                        guard count > 0 else {
                            throw .invalid("entry \(index) of \(what) cannot be unzipped (damaged, encrypted, or an unknown compression)")
                        }
                        guard file.count + count <= room else {
                            throw .tooLarge("the unzipped log files are larger than \(limits.maxInflatedBytes) bytes together")
                        }
                        file.append(contentsOf: chunk[..<count])
                    }
                    room -= file.count
                    files.append(file)
                }
                return files
            }
        }
        let files = try read.get()
        budget = room
        return files
    }
}
