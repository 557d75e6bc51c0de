@_spi(Fuzzing) import Cachalot

/// libFuzzer's entry: reads the input as the bytes of a disk entry's file (see `FuzzTarget.entryFile`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.entryFile(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
