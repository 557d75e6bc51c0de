@_spi(Fuzzing) import Cachalot
@_spi(Fuzzing) import CachalotNIO

/// libFuzzer's entry: reads the input as what an origin sends (see `FuzzTarget.originResponse`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.originResponse(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
