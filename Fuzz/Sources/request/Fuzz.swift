@_spi(Fuzzing) import Cachalot
@_spi(Fuzzing) import CachalotServer

/// libFuzzer's entry: reads the input as what a client sends the proxy (see `FuzzTarget.request`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.request(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
