import Foundation
import ZIPFoundation

/// The files of a zip archive a device uploaded as its log: every file entry, in the
/// archive's order (directories skipped, links refused), within ``ClientLogLimits``.
enum ClientLogZip {
    /// Whether `bytes` starts with a zip's local file header (`PK\x03\x04`).
    static func looksLikeZip(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.starts(with: [0x50, 0x4B, 0x03, 0x04])
    }

    /// The archive's files; `budget` is what may still be inflated, shared with the rest of the
    /// upload, and goes down as the files are read. The budget is checked on every chunk that
    /// comes out of the inflater, so an archive that would inflate past it (a zip bomb) is
    /// stopped after at most one chunk more, whatever its headers claim.
    static func files(of bytes: [UInt8], limits: ClientLogLimits, budget: inout Int, described what: String) throws(ClientUploadError) -> [[UInt8]] {
        let archive: Archive
        do {
            archive = try Archive(data: Data(bytes), accessMode: .read)
        } catch {
            throw .invalid("\(what) is not a readable zip archive")
        }
        var files: [[UInt8]] = []
        var index = 0
        for entry in archive {
            index += 1
            switch entry.type {
            case .directory: continue
            case .symlink: throw .invalid("\(what) holds a link (entry \(index)); only files are read")
            case .file: break
            }
            guard files.count < limits.maxFiles else { throw .tooLarge("\(what) holds more than \(limits.maxFiles) files") }
            var file: [UInt8] = []
            var over = false
            let room = budget
            do {
                _ = try archive.extract(entry, bufferSize: 16 * 1024) { chunk in
                    guard file.count + chunk.count <= room else {
                        over = true
                        throw CocoaError(.fileReadTooLarge)
                    }
                    file.append(contentsOf: chunk)
                }
            } catch {
                if over { throw .tooLarge("the unzipped log files are larger than \(limits.maxInflatedBytes) bytes together") }
                throw .invalid("entry \(index) of \(what) cannot be unzipped (damaged, or a compression other than deflate)")
            }
            budget -= file.count
            files.append(file)
        }
        return files
    }
}
