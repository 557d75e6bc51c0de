// The C half of CachalotImages: decoding and encoding through libpng and libjpeg(-turbo).
//
// Both libraries report errors by longjmp. Every jump lands in the function of this file that
// called the library, before any Swift frame: Swift sees only a status and a message.

#ifndef CACHALOT_IMAGE_CODECS_H
#define CACHALOT_IMAGE_CODECS_H

#include <stddef.h>
#include <stdint.h>

/// What a call did.
typedef enum {
    CACHALOT_IMAGE_OK = 0,
    /// The data is not a valid image of the format (the message says why).
    CACHALOT_IMAGE_CORRUPT = 1,
    /// The data ends before the image does.
    CACHALOT_IMAGE_TRUNCATED = 2,
    /// The header declares more pixels than the caller allows; nothing large was allocated.
    CACHALOT_IMAGE_TOO_LARGE = 3,
    /// The image uses something this decoder does not convert (such as CMYK JPEG).
    CACHALOT_IMAGE_UNSUPPORTED = 4,
    CACHALOT_IMAGE_OUT_OF_MEMORY = 5,
} cachalot_image_status;

/// Decoded pixels: rows of `channels` bytes a pixel, 1 (gray) or 4 (RGBA), premultiplied by
/// nothing. `pixels` was allocated with malloc; the caller frees it.
typedef struct {
    uint8_t *pixels;
    uint32_t width;
    uint32_t height;
    uint32_t bytes_per_row;
    uint32_t channels;
} cachalot_pixels;

/// The size a JPEG declares, read from its header only.
cachalot_image_status cachalot_jpeg_size(
    const uint8_t *data, size_t size, uint32_t *width, uint32_t *height, char *message, size_t message_size);

/// Decodes a JPEG, scaled by 1/`scale_denominator` (1, 2, 4 or 8) inside the decoder. Gray
/// JPEGs give 1 channel, others RGBA. Refuses an image declaring more than `maximum_pixels`.
cachalot_image_status cachalot_jpeg_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, unsigned scale_denominator,
    cachalot_pixels *out, char *message, size_t message_size);

/// Decodes a PNG of any kind (gray, gray-alpha, palette, RGB, RGBA; 1 to 16 bits; interlaced):
/// gray without transparency gives 1 channel, everything else RGBA, 8 bits a channel.
cachalot_image_status cachalot_png_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, cachalot_pixels *out, char *message,
    size_t message_size);

/// Encodes pixels of 1 or 4 channels as JPEG at `quality` (1 to 100), progressive (libjpeg's
/// default script of scans) if `progressive` is not 0; alpha is dropped. `*out` is allocated with
/// malloc; the caller frees it.
cachalot_image_status cachalot_jpeg_encode(
    const cachalot_pixels *image, int quality, int progressive, uint8_t **out, size_t *out_size,
    char *message, size_t message_size);

/// Encodes pixels of 1 or 4 channels as PNG. `*out` is allocated with malloc; the caller frees it.
cachalot_image_status cachalot_png_encode(
    const cachalot_pixels *image, uint8_t **out, size_t *out_size, char *message, size_t message_size);

#endif
