import Cachalot
import CachalotTesting
import Foundation

// A child process for the disk cache's crash and multi-process tests.
//
//   CachalotTestWorker write <directory> <seed> <size limit>
//       Sets, and sometimes removes, entries forever, printing a line after each change, until
//       it is killed.
//   CachalotTestWorker mix <directory> <seed> <operations> <size limit>
//       Sets, gets and removes random keys, checking every read; exits 1 on a wrong read.
//   CachalotTestWorker verify <directory> <size limit>
//       Opens the cache and checks that every entry it lists reads back whole, that its total
//       size (in whole allocation units) and count match the files, and that the total is within
//       the limit; exits 1 if not.
//
// Every body is derived from its key and a version kept in the metadata, so that any process
// can check any entry it reads.

/// The body of version `version` of `key`, `length` bytes long.
func body(key: String, version: UInt64, length: Int) -> Data {
    var random = SeededGenerator(seed: UInt64(truncatingIfNeeded: key.hashValueStable) ^ version)
    var data = Data(count: length)
    data.withUnsafeMutableBytes { bytes in
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: random.next()) }
    }
    return data
}

/// Whether `entry` is exactly what some version of its key would hold.
func isIntact(_ entry: DiskCache.Entry) -> Bool {
    let fields = String(decoding: entry.metadata, as: UTF8.self).split(separator: " ")
    guard fields.count == 2, let version = UInt64(fields[0]), let length = Int(fields[1]) else { return false }
    return entry.data.count == length && entry.data == body(key: entry.key, version: version, length: length)
}

extension String {
    /// A hash that is the same in every process (Swift's `hashValue` is seeded per process).
    var hashValueStable: UInt64 {
        self.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01B3 }
    }
}

/// From a few bytes to a couple of megabytes, most of them small.
func randomLength(using random: inout SeededGenerator) -> Int {
    let exponent = Double.random(in: 0...21, using: &random)
    return Int(pow(2, exponent))
}

func store(_ cache: DiskCache, key: String, using random: inout SeededGenerator) throws {
    let version = random.next()
    let length = randomLength(using: &random)
    try cache.set(
        body(key: key, version: version, length: length),
        forKey: key,
        metadata: Data("\(version) \(length)".utf8)
    )
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: CachalotTestWorker write|mix <directory> <seed> ...\n".utf8))
    exit(2)
}
let directory = URL(fileURLWithPath: arguments[2])
var random = SeededGenerator(seed: arguments.count > 3 ? UInt64(arguments[3]) ?? 1 : 1)

do {
    switch arguments[1] {
    case "write":
        let limit = Int(arguments[4]) ?? (8 << 20)
        let cache = try DiskCache(directory: directory, configuration: .init(sizeLimit: limit))
        while true {
            let key = "https://example.com/item/\(Int.random(in: 0..<200, using: &random))?q=\(arguments[3])"
            if Int.random(in: 0..<10, using: &random) == 0 {
                try cache.removeValue(forKey: key)
            } else {
                try store(cache, key: key, using: &random)
            }
            FileHandle.standardOutput.write(Data("done\n".utf8))
        }
    case "mix":
        let operations = Int(arguments[4]) ?? 1_000
        let limit = Int(arguments[5]) ?? (8 << 20)
        let cache = try DiskCache(directory: directory, configuration: .init(sizeLimit: limit))
        for _ in 0..<operations {
            let key = "key-\(Int.random(in: 0..<60, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                try store(cache, key: key, using: &random)
            case 4..<9:
                if let entry = try cache.entry(forKey: key), !isIntact(entry) || entry.key != key {
                    FileHandle.standardError.write(Data("wrong read for \(key)\n".utf8))
                    exit(1)
                }
            default:
                try cache.removeValue(forKey: key)
            }
        }
    case "verify":
        let limit = Int(arguments[3]) ?? (8 << 20)
        let cache = try DiskCache(directory: directory, configuration: .init(sizeLimit: limit))
        var problems: [String] = []
        let entries = try cache.entries()
        for info in entries {
            guard let entry = try cache.entry(forKey: info.key) else {
                problems.append("listed entry \(info.key) does not read back")
                continue
            }
            if !isIntact(entry) { problems.append("entry \(info.key) is not what was written") }
        }
        var fileSizes = 0
        var fileCount = 0
        var fileSystem = statvfs()
        guard statvfs(directory.path, &fileSystem) == 0 else { fatalError("statvfs \(directory.path) failed") }
        let unit = Int(fileSystem.f_frsize)
        let files = FileManager.default.enumerator(atPath: directory.appendingPathComponent("entries").path)
        while let name = files?.nextObject() as? String {
            let attributes = try FileManager.default.attributesOfItem(
                atPath: directory.appendingPathComponent("entries").appendingPathComponent(name).path
            )
            if attributes[.type] as? FileAttributeType == .typeRegular {
                // The limit counts each file in whole allocation units of the file system.
                let size = (attributes[.size] as? Int) ?? 0
                fileSizes += (size + unit - 1) / unit * unit
                fileCount += 1
            }
        }
        let total = try cache.totalSize
        if total != fileSizes { problems.append("recorded total \(total), files add up to \(fileSizes)") }
        if entries.count != fileCount { problems.append("\(entries.count) entries listed, \(fileCount) files") }
        if total > limit { problems.append("total \(total) above the limit \(limit)") }
        if !problems.isEmpty {
            FileHandle.standardError.write(Data((problems.joined(separator: "\n") + "\n").utf8))
            exit(1)
        }
    default:
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(3)
}
