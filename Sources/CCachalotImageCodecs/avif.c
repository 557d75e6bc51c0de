#include "ImageCodecs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <avif/avif.h>

/// The status and message for a libavif result, with its diagnostic if it gave one.
static cachalot_image_status failed(avifResult result, const char *detail, char *message, size_t message_size) {
    snprintf(message, message_size, "%s%s%s", avifResultToString(result), detail && detail[0] ? ": " : "",
             detail ? detail : "");
    switch (result) {
    case AVIF_RESULT_TRUNCATED_DATA:
        snprintf(message, message_size, "the data ends before the AVIF does");
        return CACHALOT_IMAGE_TRUNCATED;
    case AVIF_RESULT_NO_CODEC_AVAILABLE:
    case AVIF_RESULT_NOT_IMPLEMENTED:
    case AVIF_RESULT_UNSUPPORTED_DEPTH:
        return CACHALOT_IMAGE_UNSUPPORTED;
    case AVIF_RESULT_OUT_OF_MEMORY:
        return CACHALOT_IMAGE_OUT_OF_MEMORY;
    default:
        return CACHALOT_IMAGE_CORRUPT;
    }
}

/// A decoder over `data`, parsed (boxes read, nothing decoded), or NULL with the status set.
static avifDecoder *parsed(
    const uint8_t *data, size_t size, cachalot_image_status *status, char *message, size_t message_size) {
    avifDecoder *decoder = avifDecoderCreate();
    if (decoder == NULL) {
        *status = failed(AVIF_RESULT_OUT_OF_MEMORY, NULL, message, message_size);
        return NULL;
    }
    decoder->ignoreExif = AVIF_TRUE;
    decoder->ignoreXMP = AVIF_TRUE;
    avifResult result = avifDecoderSetIOMemory(decoder, data, size);
    if (result == AVIF_RESULT_OK) {
        result = avifDecoderParse(decoder);
    }
    if (result != AVIF_RESULT_OK) {
        *status = failed(result, decoder->diag.error, message, message_size);
        avifDecoderDestroy(decoder);
        return NULL;
    }
    *status = CACHALOT_IMAGE_OK;
    return decoder;
}

/// How the image's 'irot' and 'imir' properties turn its pixels, as an EXIF orientation (1 to
/// 8). 'irot' turns by `angle` quarter turns anticlockwise, then 'imir' mirrors (ISO/IEC
/// 23008-12:2022, 6.5.10 and 6.5.12): its bit 0 exchanges top and bottom (EXIF 4), 1 left and
/// right (EXIF 2). libavif names the field `axis` from 1.0 on and before 0.9.2, `mode` between;
/// the meaning is the same.
static int orientation_of(const avifImage *image) {
    // [angle][mirror: none, left-right, top-bottom]
    static const int table[4][3] = {{1, 2, 4}, {8, 7, 5}, {3, 4, 2}, {6, 5, 7}};
    int angle = (image->transformFlags & AVIF_TRANSFORM_IROT) ? (image->irot.angle & 3) : 0;
    int mirror = 0;
    if (image->transformFlags & AVIF_TRANSFORM_IMIR) {
#if AVIF_VERSION_MAJOR >= 1 || (AVIF_VERSION_MAJOR == 0 && (AVIF_VERSION_MINOR < 9 || (AVIF_VERSION_MINOR == 9 && AVIF_VERSION_PATCH < 2)))
        int bit = image->imir.axis & 1;
#else
        int bit = image->imir.mode & 1;
#endif
        mirror = bit ? 1 : 2;
    }
    return table[angle][mirror];
}

cachalot_image_status cachalot_avif_size(
    const uint8_t *data, size_t size, uint32_t *width, uint32_t *height, char *message, size_t message_size) {
    cachalot_image_status status;
    avifDecoder *decoder = parsed(data, size, &status, message, message_size);
    if (decoder == NULL) {
        return status;
    }
    // As it is seen: a quarter turn exchanges width and height.
    int turned = orientation_of(decoder->image) >= 5;
    *width = turned ? decoder->image->height : decoder->image->width;
    *height = turned ? decoder->image->width : decoder->image->height;
    avifDecoderDestroy(decoder);
    return CACHALOT_IMAGE_OK;
}

cachalot_image_status cachalot_avif_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, cachalot_pixels *out, int *orientation,
    char *message, size_t message_size) {
    cachalot_image_status status;
    avifDecoder *decoder = parsed(data, size, &status, message, message_size);
    if (decoder == NULL) {
        return status;
    }
    uint32_t width = decoder->image->width;
    uint32_t height = decoder->image->height;
    if ((uint64_t)width * height > maximum_pixels) {
        snprintf(message, message_size, "the AVIF declares %ux%u pixels, more than the %llu allowed", width, height,
                 (unsigned long long)maximum_pixels);
        avifDecoderDestroy(decoder);
        return CACHALOT_IMAGE_TOO_LARGE;
    }
    avifResult result = avifDecoderNextImage(decoder);
    if (result != AVIF_RESULT_OK) {
        status = failed(result, decoder->diag.error, message, message_size);
        avifDecoderDestroy(decoder);
        return status;
    }
    // The AV1 stream may disagree with the boxes: the decoded image is what counts.
    if (decoder->image->width != width || decoder->image->height != height) {
        snprintf(message, message_size, "the AVIF declares %ux%u pixels but holds %ux%u", width, height,
                 decoder->image->width, decoder->image->height);
        avifDecoderDestroy(decoder);
        return CACHALOT_IMAGE_CORRUPT;
    }
    *orientation = orientation_of(decoder->image);
    avifRGBImage rgb;
    avifRGBImageSetDefaults(&rgb, decoder->image);
    rgb.format = AVIF_RGB_FORMAT_RGBA;
    rgb.depth = 8;
    rgb.rowBytes = width * 4;
    rgb.pixels = malloc((size_t)rgb.rowBytes * height);
    if (rgb.pixels == NULL) {
        avifDecoderDestroy(decoder);
        return failed(AVIF_RESULT_OUT_OF_MEMORY, NULL, message, message_size);
    }
    result = avifImageYUVToRGB(decoder->image, &rgb);
    avifDecoderDestroy(decoder);
    if (result != AVIF_RESULT_OK) {
        free(rgb.pixels);
        return failed(result, NULL, message, message_size);
    }
    *out = (cachalot_pixels){rgb.pixels, width, height, rgb.rowBytes, 4};
    return CACHALOT_IMAGE_OK;
}

cachalot_image_status cachalot_avif_encode(
    const cachalot_pixels *image, int quality, int speed, uint8_t **out, size_t *out_size, char *message,
    size_t message_size) {
    uint8_t *rgba = cachalot_rgba_copy(image);
    avifImage *yuv = avifImageCreate(image->width, image->height, 8, AVIF_PIXEL_FORMAT_YUV420);
    avifEncoder *encoder = avifEncoderCreate();
    avifRWData output = AVIF_DATA_EMPTY;
    avifResult result = rgba && yuv && encoder ? AVIF_RESULT_OK : AVIF_RESULT_OUT_OF_MEMORY;
    if (result == AVIF_RESULT_OK) {
        cachalot_pixels packed = {rgba, image->width, image->height, image->width * 4, 4};
        int alpha = cachalot_has_alpha(&packed);
        yuv->yuvRange = AVIF_RANGE_FULL;
        avifRGBImage rgb;
        avifRGBImageSetDefaults(&rgb, yuv);
        rgb.format = AVIF_RGB_FORMAT_RGBA;
        rgb.depth = 8;
        rgb.ignoreAlpha = alpha ? AVIF_FALSE : AVIF_TRUE;
        rgb.pixels = rgba;
        rgb.rowBytes = packed.bytes_per_row;
        result = avifImageAllocatePlanes(yuv, alpha ? AVIF_PLANES_ALL : AVIF_PLANES_YUV);
        if (result == AVIF_RESULT_OK) {
            result = avifImageRGBToYUV(yuv, &rgb);
        }
    }
    if (result == AVIF_RESULT_OK) {
        // Quality 100 is quantizer 0 (lossless-grade), quality 0 is 63, the coarsest; alpha lossless.
        int clamped = quality < 0 ? 0 : quality > 100 ? 100 : quality;
        int quantizer = ((100 - clamped) * AVIF_QUANTIZER_WORST_QUALITY + 50) / 100;
        encoder->minQuantizer = encoder->maxQuantizer = quantizer;
        encoder->minQuantizerAlpha = encoder->maxQuantizerAlpha = AVIF_QUANTIZER_LOSSLESS;
        encoder->speed = speed < AVIF_SPEED_SLOWEST ? AVIF_SPEED_SLOWEST : speed > AVIF_SPEED_FASTEST ? AVIF_SPEED_FASTEST : speed;
        encoder->maxThreads = 1;
        result = avifEncoderWrite(encoder, yuv, &output);
    }
    cachalot_image_status status = CACHALOT_IMAGE_OK;
    if (result != AVIF_RESULT_OK) {
        status = failed(result, encoder ? encoder->diag.error : NULL, message, message_size);
        if (status == CACHALOT_IMAGE_CORRUPT) {
            status = CACHALOT_IMAGE_UNSUPPORTED;
        }
    } else if ((*out = malloc(output.size)) == NULL) {
        status = failed(AVIF_RESULT_OUT_OF_MEMORY, NULL, message, message_size);
    } else {
        memcpy(*out, output.data, output.size);
        *out_size = output.size;
    }
    avifRWDataFree(&output);
    if (encoder) {
        avifEncoderDestroy(encoder);
    }
    if (yuv) {
        avifImageDestroy(yuv);
    }
    free(rgba);
    return status;
}
