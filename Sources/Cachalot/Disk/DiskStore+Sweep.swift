extension DiskStore {
    /// A sweep goes through `entries/` in this many steps: one for each of the 256
    /// subdirectories, then one for anything else in `entries/`.
    static let sweepSteps = 257

    /// Makes one part of `entries/` agree with the index, and returns how many files and entries
    /// it fixed. Steps 0 to 255 take the subdirectory of that number: they remove the files that
    /// the journal does not know (left by a lost journal, or put there by something other than
    /// the cache) and record as removed the entries whose files are gone. The last step removes
    /// whatever else is in `entries/`. A stray that cannot be removed (a directory that is not
    /// empty) stays, and is not counted. Every removal is relative to a directory's descriptor,
    /// opened without following links: a symbolic link is removed, never what it points to.
    func sweep(step: Int, _ state: inout State) throws(CacheError) -> Int {
        let entries = try self.entriesDescriptor()
        guard step < 256 else {
            var removed = 0
            for name in try FileIO.names(in: entries, path: self.entries)
            where KeyDigest.subdirectoryNumber(name) == nil {
                if Self.removeStray(name, in: entries, path: "\(self.entries)/\(name)") { removed += 1 }
            }
            return removed
        }
        let subdirectory = UInt8(step)
        let name = KeyDigest.hexadecimal(subdirectory)
        let path = "\(self.entries)/\(name)"
        var removed = 0
        var present = Set<KeyDigest>()
        if let directory = try self.openSubdirectory(subdirectory) {
            defer { FileIO.closeDescriptor(directory) }
            for file in try FileIO.names(in: directory, path: path) {
                if let digest = KeyDigest(hexadecimal: Substring(file)), digest.subdirectory == subdirectory,
                    state.index.entry(for: digest) != nil
                {
                    present.insert(digest)
                } else if Self.removeStray(file, in: directory, path: "\(path)/\(file)") {
                    removed += 1
                }
            }
        } else if Self.removeStray(name, in: entries, path: path) {
            // A file or a symbolic link where the subdirectory belongs.
            removed += 1
        }
        guard present.count < state.index.count(inSubdirectory: subdirectory) else { return removed }
        let missing = state.index.digests { $0.digest.subdirectory == subdirectory && !present.contains($0.digest) }
        try self.remove(missing, &state)
        return removed + missing.count
    }

    /// Removes a stray file, symbolic link or empty directory; returns whether it did.
    private static func removeStray(_ name: String, in directory: Int32, path: String) -> Bool {
        (try? FileIO.removeFile(named: name, in: directory, path: path)) == true
    }
}
