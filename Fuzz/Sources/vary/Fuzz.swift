@_spi(Fuzzing) import Cachalot

/// libFuzzer's entry: reads the input as a varying response's fields and two requests' (see `FuzzTarget.vary`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.vary(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
