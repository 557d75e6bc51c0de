// The C half of CachalotImages: decoding and encoding through libpng, libjpeg(-turbo), libwebp,
// libavif and giflib.
//
// libpng and libjpeg report errors by longjmp. Every jump lands in the function of this file that
// called the library, before any Swift frame: Swift sees only a status and a message. The others
// return error codes.

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
/// gray without transparency gives 1 channel, everything else RGBA, 8 bits a channel. With a
/// `factor` over 1, shrunk by it with a box filter as cachalot_box_reduce does (colors weighted
/// by alpha), each row going into the reduction as it is decoded: the full-size image is never
/// held, unless it is interlaced.
cachalot_image_status cachalot_png_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t factor, cachalot_pixels *out,
    char *message, size_t message_size);

/// Encodes pixels of 1 or 4 channels as JPEG at `quality` (1 to 100), progressive (libjpeg's
/// default script of scans) if `progressive` is not 0; alpha is dropped. `*out` is allocated with
/// malloc; the caller frees it.
cachalot_image_status cachalot_jpeg_encode(
    const cachalot_pixels *image, int quality, int progressive, uint8_t **out, size_t *out_size,
    char *message, size_t message_size);

/// Encodes pixels of 1 or 4 channels as PNG. `*out` is allocated with malloc; the caller frees it.
cachalot_image_status cachalot_png_encode(
    const cachalot_pixels *image, uint8_t **out, size_t *out_size, char *message, size_t message_size);

/// Each frame of an animation counts as at least this many pixels against a decoder's limit, for
/// what it costs to keep besides its pixels: a million frames of 1 × 1 are a bomb too.
#define CACHALOT_MINIMUM_FRAME_PIXELS 256

/// The frames of an animation, each composited onto the whole canvas as it is to be shown.
typedef struct {
    /// `frame_count` frames of 4 channels (RGBA), each allocated with malloc; the array too.
    cachalot_pixels *frames;
    /// How long each frame shows, in milliseconds; allocated with malloc.
    uint32_t *durations;
    uint32_t frame_count;
    /// How many times the animation plays; 0 for ever.
    uint32_t loop_count;
} cachalot_animation;

/// Frees an animation's frames, durations and arrays.
void cachalot_animation_free(cachalot_animation *animation);

/// The canvas size a WebP declares, read from its header only.
cachalot_image_status cachalot_webp_size(
    const uint8_t *data, size_t size, uint32_t *width, uint32_t *height, char *message, size_t message_size);

/// Decodes a still WebP (lossy, lossless, with or without alpha) as RGBA. With a `scale` of 1/2 or
/// less, libwebp's rescaler shrinks it as it is decoded to `scale` of its size, rounded up: the
/// full-size picture is never held. An animated one gives its first frame: scaled the same way
/// when it covers the canvas, else composited whole. Refuses an image declaring more than
/// `maximum_pixels`.
cachalot_image_status cachalot_webp_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, double scale, cachalot_pixels *out, char *message,
    size_t message_size);

/// Decodes the frames of a WebP, animated or not, at most `maximum_frames` of them (0: all).
/// Refuses one whose frames would hold more than `maximum_pixels` together (each counting its
/// canvas, at least CACHALOT_MINIMUM_FRAME_PIXELS), before decoding.
cachalot_image_status cachalot_webp_decode_animation(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t maximum_frames,
    cachalot_animation *out, char *message, size_t message_size);

/// How many frames a WebP has (1 for a still), read from its chunks without decoding.
cachalot_image_status cachalot_webp_frame_count(
    const uint8_t *data, size_t size, uint32_t *count, char *message, size_t message_size);

/// An animated WebP being encoded, a frame at a time.
typedef struct cachalot_webp_animation cachalot_webp_animation;

/// Starts an animated WebP of `width` × `height` (each at most 16,383), lossy at `quality` (0 to
/// 100), played `loop_count` times (0: for ever); NULL, with a message, if libwebp cannot.
/// libwebp stores each frame as the rectangle that changed, and merges a frame identical to the
/// one before into it, adding its duration. End it with cachalot_webp_animation_finish.
cachalot_webp_animation *cachalot_webp_animation_start(
    uint32_t width, uint32_t height, uint32_t loop_count, int quality, char *message, size_t message_size);

/// Adds a frame of 1 or 4 channels, of the animation's size, shown for `duration` milliseconds.
cachalot_image_status cachalot_webp_animation_add(
    cachalot_webp_animation *animation, const cachalot_pixels *frame, uint32_t duration, char *message,
    size_t message_size);

/// Assembles the animation into `*out` (allocated with malloc), or abandons it if `out` is NULL,
/// and frees the animation either way.
cachalot_image_status cachalot_webp_animation_finish(
    cachalot_webp_animation *animation, uint8_t **out, size_t *out_size, char *message, size_t message_size);

/// Encodes pixels of 1 or 4 channels as WebP: lossy at `quality` (0 to 100), or lossless if
/// `lossless` is not 0. Alpha is kept if some pixel is not opaque. `*out` is allocated with malloc.
cachalot_image_status cachalot_webp_encode(
    const cachalot_pixels *image, int quality, int lossless, uint8_t **out, size_t *out_size, char *message,
    size_t message_size);

/// The size an AVIF declares, read from its boxes without decoding: as it is seen, after its
/// 'irot' property.
cachalot_image_status cachalot_avif_size(
    const uint8_t *data, size_t size, uint32_t *width, uint32_t *height, char *message, size_t message_size);

/// Decodes an AVIF (the first image of a sequence) as RGBA, 8 bits a channel, as stored: its
/// 'irot' and 'imir' properties come back in `*orientation`, as the EXIF orientation (1 to 8)
/// that turns the pixels upright. Refuses an image declaring more than `maximum_pixels`, before
/// decoding.
cachalot_image_status cachalot_avif_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, cachalot_pixels *out, int *orientation,
    char *message, size_t message_size);

/// Encodes pixels of 1 or 4 channels as AVIF (4:2:0, 8 bits) at `quality` (0 to 100) and
/// `speed` (0, slowest, to 10); alpha is kept, losslessly, if some pixel is not opaque.
cachalot_image_status cachalot_avif_encode(
    const cachalot_pixels *image, int quality, int speed, uint8_t **out, size_t *out_size, char *message,
    size_t message_size);

/// Decodes the frames of a GIF, at most `maximum_frames` of them (0: all), each composited as
/// browsers do (transparent background, disposal methods, transparency). Refuses a canvas or a
/// frame of more than `maximum_pixels`, and stops with that error before allocating the frame
/// that would take the frames past it (each counting its canvas, at least
/// CACHALOT_MINIMUM_FRAME_PIXELS).
cachalot_image_status cachalot_gif_decode_animation(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t maximum_frames,
    cachalot_animation *out, char *message, size_t message_size);

/// Decodes the first frame of a GIF as cachalot_gif_decode_animation does, shrunk by `factor`
/// (1: not at all) with a box filter as cachalot_png_decode does: each row of the canvas goes into
/// the reduction as it is decoded, so that the canvas is never held at full size (an interlaced
/// frame is held as indices, a byte a pixel, until its last pass).
cachalot_image_status cachalot_gif_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t factor, cachalot_pixels *out,
    char *message, size_t message_size);

/// How many frames a GIF has, at most `maximum` (0: all), read from its records without decoding
/// them; a GIF may end without its trailer after a whole frame, as in `cachalot_gif_decode`.
cachalot_image_status cachalot_gif_frame_count(
    const uint8_t *data, size_t size, uint32_t maximum, uint32_t *count, char *message, size_t message_size);

/// Whether some pixel of RGBA pixels is not fully opaque; gray pixels never are.
int cachalot_has_alpha(const cachalot_pixels *image);

/// A copy of pixels of 1 or 4 channels as RGBA, rows packed; NULL if memory ran out.
uint8_t *cachalot_rgba_copy(const cachalot_pixels *image);

/// `image` shrunk by a whole `factor` (1 or more; at most 65,536 is used) with a box filter: each
/// pixel out is the rounded mean of a `factor` × `factor` block (smaller at the right and bottom
/// edges), channel by channel. Returns 0 if memory ran out; `out->pixels` is allocated with
/// malloc.
int cachalot_box_reduce(const cachalot_pixels *image, uint32_t factor, cachalot_pixels *out);

#endif
