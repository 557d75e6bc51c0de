@_spi(Fuzzing) import Cachalot

/// libFuzzer's entry: reads the input as a stored response's metadata (see `FuzzTarget.storedResponse`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.storedResponse(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
