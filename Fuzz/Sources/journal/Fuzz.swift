@_spi(Fuzzing) import Cachalot

/// libFuzzer's entry: reads the input as the records of a disk cache's journal (see `FuzzTarget.journal`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.journal(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
