extension String {
    /// Calls `body` with the string's UTF-8, borrowed: unlike `withUTF8`, which needs a mutable
    /// copy, it costs no retain and release. Native Swift strings are always contiguous; any
    /// other is copied first.
    func withBorrowedUTF8<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = self.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(self.utf8).withUnsafeBufferPointer(body)
    }
}
