@_spi(Fuzzing) import Cachalot

/// libFuzzer's entry: reads the input as an HTTP date (see `FuzzTarget.httpDate`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.httpDate(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
