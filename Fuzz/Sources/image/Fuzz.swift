@_spi(Fuzzing) import Cachalot
@_spi(Fuzzing) import CachalotImages

/// libFuzzer's entry: reads the input as a PNG or JPEG image (see `FuzzTarget.image`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.image(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
