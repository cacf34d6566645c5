import CLibArchive

/// Zip archives for tests, written with libarchive (the library Midtier reads them with).
package enum TestZip {
    /// A zip archive of `files` (name, bytes), deflated.
    package static func make(_ files: [(String, [UInt8])]) -> [UInt8] {
        let capacity = files.reduce(64 * 1024) { $0 + $1.0.utf8.count + $1.1.count + 512 }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer { buffer.deallocate() }
        let used = UnsafeMutablePointer<Int>.allocate(capacity: 1)
        defer { used.deallocate() }
        used.pointee = 0
        guard let archive = archive_write_new() else { return [] }
        defer { archive_write_free(archive) }
        archive_write_set_format_zip(archive)
        archive_write_open_memory(archive, buffer.baseAddress, capacity, used)
        for (name, bytes) in files {
            guard let entry = archive_entry_new() else { continue }
            archive_entry_set_pathname(entry, name)
            archive_entry_set_size(entry, Int64(bytes.count))
            archive_entry_set_filetype(entry, midtier_archive_regular_file())
            archive_entry_set_perm(entry, 0o644)
            archive_write_header(archive, entry)
            _ = bytes.withUnsafeBytes { archive_write_data(archive, $0.baseAddress, $0.count) }
            archive_entry_free(entry)
        }
        archive_write_close(archive)
        return Array(UnsafeRawBufferPointer(rebasing: buffer[..<used.pointee]))
    }
}
