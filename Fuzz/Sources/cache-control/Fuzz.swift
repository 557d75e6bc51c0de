@_spi(Fuzzing) import Cachalot

/// libFuzzer's entry: reads the input as `Cache-Control` field lines (see `FuzzTarget.cacheControl`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.cacheControl(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
