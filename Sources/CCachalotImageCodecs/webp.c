#include "ImageCodecs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>
#include <webp/encode.h>
#include <webp/mux.h>

/// The status and message for a libwebp status.
static cachalot_image_status failed(VP8StatusCode code, char *message, size_t message_size) {
    switch (code) {
    case VP8_STATUS_NOT_ENOUGH_DATA:
        snprintf(message, message_size, "the data ends before the WebP does");
        return CACHALOT_IMAGE_TRUNCATED;
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        snprintf(message, message_size, "the WebP uses a feature libwebp does not support");
        return CACHALOT_IMAGE_UNSUPPORTED;
    case VP8_STATUS_OUT_OF_MEMORY:
        snprintf(message, message_size, "out of memory");
        return CACHALOT_IMAGE_OUT_OF_MEMORY;
    default:
        snprintf(message, message_size, "the WebP is damaged (libwebp status %d)", (int)code);
        return CACHALOT_IMAGE_CORRUPT;
    }
}

cachalot_image_status cachalot_webp_size(
    const uint8_t *data, size_t size, uint32_t *width, uint32_t *height, char *message, size_t message_size) {
    WebPBitstreamFeatures features;
    VP8StatusCode code = WebPGetFeatures(data, size, &features);
    if (code != VP8_STATUS_OK) {
        return failed(code, message, message_size);
    }
    *width = (uint32_t)features.width;
    *height = (uint32_t)features.height;
    return CACHALOT_IMAGE_OK;
}

/// Refuses a canvas of `width` × `height` pixels, `frames` times, past `maximum_pixels`.
static cachalot_image_status check_pixels(
    uint64_t width, uint64_t height, uint64_t frames, uint64_t maximum_pixels, char *message, size_t message_size) {
    uint64_t area = width * height;  // each side is under 2^24
    uint64_t cost = frames > 1 && area < CACHALOT_MINIMUM_FRAME_PIXELS ? CACHALOT_MINIMUM_FRAME_PIXELS : area;
    if (area > maximum_pixels || (cost != 0 && frames > maximum_pixels / cost)) {
        snprintf(message, message_size, "the WebP declares %llux%llu pixels in %llu frames, more than the %llu allowed",
                 (unsigned long long)width, (unsigned long long)height, (unsigned long long)frames,
                 (unsigned long long)maximum_pixels);
        return CACHALOT_IMAGE_TOO_LARGE;
    }
    return CACHALOT_IMAGE_OK;
}

/// Why the demuxer refused `input`: a file whose chunks end early is truncated, any other damaged.
static cachalot_image_status demux_failure(const WebPData *input, char *message, size_t message_size) {
    WebPDemuxState state;
    WebPDemuxer *demuxer = WebPDemuxPartial(input, &state);
    WebPDemuxDelete(demuxer);
    return failed(state == WEBP_DEMUX_PARSED_HEADER || state == WEBP_DEMUX_PARSING_HEADER ? VP8_STATUS_NOT_ENOUGH_DATA
                                                                                         : VP8_STATUS_BITSTREAM_ERROR,
                  message, message_size);
}

/// `length` × `scale`, rounded up (forgiving a rounding error), between 1 and `length`.
static uint32_t scaled_length(uint32_t length, double scale) {
    double scaled = ceil((double)length * scale - 1e-6);
    return scaled < 1 ? 1 : scaled > length ? length : (uint32_t)scaled;
}

/// Decodes one bitstream (a still WebP, or a frame's payload: ALPH and VP8, or VP8L) of
/// `width` × `height` pixels as RGBA, scaled by `scale` inside the decoder if it is 1/2 or less
/// (below that, libwebp's rescaler costs more than it saves).
static cachalot_image_status decode_scaled(
    WebPDecoderConfig *config, const uint8_t *data, size_t size, uint32_t width, uint32_t height, double scale,
    cachalot_pixels *out, char *message, size_t message_size) {
    int scaling = scale <= 0.5;
    uint32_t scaled_width = scaling ? scaled_length(width, scale) : width;
    uint32_t scaled_height = scaling ? scaled_length(height, scale) : height;
    size_t row_bytes = (size_t)scaled_width * 4;
    uint8_t *pixels = malloc(row_bytes * scaled_height);
    if (pixels == NULL) {
        snprintf(message, message_size, "out of memory for %ux%u pixels", scaled_width, scaled_height);
        return CACHALOT_IMAGE_OUT_OF_MEMORY;
    }
    if (scaled_width != width || scaled_height != height) {
        config->options.use_scaling = 1;
        config->options.scaled_width = (int)scaled_width;
        config->options.scaled_height = (int)scaled_height;
    }
    config->output.colorspace = MODE_RGBA;
    config->output.is_external_memory = 1;
    config->output.u.RGBA.rgba = pixels;
    config->output.u.RGBA.stride = (int)row_bytes;
    config->output.u.RGBA.size = row_bytes * scaled_height;
    VP8StatusCode code = WebPDecode(data, size, config);
    WebPFreeDecBuffer(&config->output);
    if (code != VP8_STATUS_OK) {
        free(pixels);
        return failed(code, message, message_size);
    }
    *out = (cachalot_pixels){pixels, scaled_width, scaled_height, (uint32_t)row_bytes, 4};
    return CACHALOT_IMAGE_OK;
}

/// The first frame of an animated WebP, as shown, scaled by `scale` inside the decoder when it
/// covers the whole canvas, as a first frame mostly does: it is then the frame's own picture on a
/// transparent canvas. Another first frame is composited whole by WebPAnimDecoder.
static cachalot_image_status decode_first_frame(
    WebPDecoderConfig *config, const uint8_t *data, size_t size, uint64_t maximum_pixels, double scale,
    cachalot_pixels *out, char *message, size_t message_size) {
    WebPData input = {data, size};
    WebPDemuxer *demuxer = WebPDemux(&input);
    if (demuxer == NULL) {
        return demux_failure(&input, message, message_size);
    }
    uint32_t width = WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_WIDTH);
    uint32_t height = WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_HEIGHT);
    cachalot_image_status status = check_pixels(width, height, 1, maximum_pixels, message, message_size);
    WebPIterator frame;
    if (status == CACHALOT_IMAGE_OK && !WebPDemuxGetFrame(demuxer, 1, &frame)) {
        status = failed(VP8_STATUS_BITSTREAM_ERROR, message, message_size);
    } else if (status == CACHALOT_IMAGE_OK) {
        int whole = frame.x_offset == 0 && frame.y_offset == 0 && (uint32_t)frame.width == width &&
                    (uint32_t)frame.height == height;
        status = whole ? decode_scaled(config, frame.fragment.bytes, frame.fragment.size, width, height, scale, out,
                                       message, message_size)
                       : CACHALOT_IMAGE_UNSUPPORTED;
        WebPDemuxReleaseIterator(&frame);
        if (!whole) {
            cachalot_animation animation;
            status = cachalot_webp_decode_animation(data, size, maximum_pixels, 1, &animation, message, message_size);
            if (status == CACHALOT_IMAGE_OK) {
                *out = animation.frames[0];
                animation.frames[0].pixels = NULL;
                cachalot_animation_free(&animation);
            }
        }
    }
    WebPDemuxDelete(demuxer);
    return status;
}

cachalot_image_status cachalot_webp_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, double scale, cachalot_pixels *out, char *message,
    size_t message_size) {
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) {
        snprintf(message, message_size, "libwebp's version does not match its headers");
        return CACHALOT_IMAGE_UNSUPPORTED;
    }
    VP8StatusCode code = WebPGetFeatures(data, size, &config.input);
    if (code != VP8_STATUS_OK) {
        return failed(code, message, message_size);
    }
    if (config.input.has_animation) {
        return decode_first_frame(&config, data, size, maximum_pixels, scale, out, message, message_size);
    }
    uint32_t width = (uint32_t)config.input.width;
    uint32_t height = (uint32_t)config.input.height;
    cachalot_image_status status = check_pixels(width, height, 1, maximum_pixels, message, message_size);
    if (status != CACHALOT_IMAGE_OK) {
        return status;
    }
    return decode_scaled(&config, data, size, width, height, scale, out, message, message_size);
}

cachalot_image_status cachalot_webp_decode_animation(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t maximum_frames,
    cachalot_animation *out, char *message, size_t message_size) {
    memset(out, 0, sizeof *out);
    // The canvas is checked before WebPAnimDecoderNew allocates one of its size.
    WebPBitstreamFeatures features;
    VP8StatusCode code = WebPGetFeatures(data, size, &features);
    if (code != VP8_STATUS_OK) {
        return failed(code, message, message_size);
    }
    cachalot_image_status status =
        check_pixels((uint64_t)features.width, (uint64_t)features.height, 1, maximum_pixels, message, message_size);
    if (status != CACHALOT_IMAGE_OK) {
        return status;
    }
    WebPAnimDecoderOptions options;
    if (!WebPAnimDecoderOptionsInit(&options)) {
        snprintf(message, message_size, "libwebp's version does not match its headers");
        return CACHALOT_IMAGE_UNSUPPORTED;
    }
    options.color_mode = MODE_RGBA;
    options.use_threads = 0;
    WebPData input = {data, size};
    WebPAnimDecoder *decoder = WebPAnimDecoderNew(&input, &options);
    if (decoder == NULL) {
        return demux_failure(&input, message, message_size);
    }
    WebPAnimInfo info;
    if (!WebPAnimDecoderGetInfo(decoder, &info) || info.frame_count == 0) {
        WebPAnimDecoderDelete(decoder);
        return failed(VP8_STATUS_BITSTREAM_ERROR, message, message_size);
    }
    uint32_t count = maximum_frames != 0 && maximum_frames < info.frame_count ? maximum_frames : info.frame_count;
    status = check_pixels(info.canvas_width, info.canvas_height, count, maximum_pixels, message, message_size);
    if (status != CACHALOT_IMAGE_OK) {
        WebPAnimDecoderDelete(decoder);
        return status;
    }
    out->frames = calloc(count, sizeof(cachalot_pixels));
    out->durations = calloc(count, sizeof(uint32_t));
    out->loop_count = info.loop_count;
    size_t row_bytes = (size_t)info.canvas_width * 4;
    int previous = 0;
    while (out->frame_count < count) {
        uint8_t *canvas;
        int timestamp;
        if (out->frames == NULL || out->durations == NULL) {
            status = failed(VP8_STATUS_OUT_OF_MEMORY, message, message_size);
            break;
        }
        if (!WebPAnimDecoderHasMoreFrames(decoder) || !WebPAnimDecoderGetNext(decoder, &canvas, &timestamp)) {
            status = failed(VP8_STATUS_BITSTREAM_ERROR, message, message_size);
            break;
        }
        uint8_t *pixels = malloc(row_bytes * info.canvas_height);
        if (pixels == NULL) {
            status = failed(VP8_STATUS_OUT_OF_MEMORY, message, message_size);
            break;
        }
        memcpy(pixels, canvas, row_bytes * info.canvas_height);
        out->frames[out->frame_count] = (cachalot_pixels){pixels, info.canvas_width, info.canvas_height,
                                                          (uint32_t)row_bytes, 4};
        out->durations[out->frame_count] = timestamp > previous ? (uint32_t)(timestamp - previous) : 0;
        previous = timestamp;
        out->frame_count++;
    }
    WebPAnimDecoderDelete(decoder);
    if (status != CACHALOT_IMAGE_OK) {
        cachalot_animation_free(out);
    }
    return status;
}

cachalot_image_status cachalot_webp_encode(
    const cachalot_pixels *image, int quality, int lossless, uint8_t **out, size_t *out_size, char *message,
    size_t message_size) {
    uint8_t *rgba = cachalot_rgba_copy(image);
    if (rgba == NULL) {
        return failed(VP8_STATUS_OUT_OF_MEMORY, message, message_size);
    }
    cachalot_pixels packed = {rgba, image->width, image->height, image->width * 4, 4};
    int stride = (int)packed.bytes_per_row;
    uint8_t *encoded = NULL;
    size_t size;
    if (cachalot_has_alpha(&packed)) {
        size = lossless ? WebPEncodeLosslessRGBA(rgba, (int)image->width, (int)image->height, stride, &encoded)
                        : WebPEncodeRGBA(rgba, (int)image->width, (int)image->height, stride, (float)quality, &encoded);
    } else {
        // Without alpha, as RGB: the alpha plane costs bytes even when it is all opaque.
        for (size_t i = 0; i < (size_t)image->width * image->height; i++) {
            memmove(rgba + 3 * (size_t)i, rgba + 4 * (size_t)i, 3);
        }
        stride = (int)image->width * 3;
        size = lossless ? WebPEncodeLosslessRGB(rgba, (int)image->width, (int)image->height, stride, &encoded)
                        : WebPEncodeRGB(rgba, (int)image->width, (int)image->height, stride, (float)quality, &encoded);
    }
    free(rgba);
    if (size == 0 || encoded == NULL) {
        WebPFree(encoded);
        snprintf(message, message_size, "libwebp could not encode %ux%u pixels", image->width, image->height);
        return CACHALOT_IMAGE_UNSUPPORTED;
    }
    *out = malloc(size);
    if (*out == NULL) {
        WebPFree(encoded);
        return failed(VP8_STATUS_OUT_OF_MEMORY, message, message_size);
    }
    memcpy(*out, encoded, size);
    *out_size = size;
    WebPFree(encoded);
    return CACHALOT_IMAGE_OK;
}

cachalot_image_status cachalot_webp_frame_count(
    const uint8_t *data, size_t size, uint32_t *count, char *message, size_t message_size) {
    WebPData input = {data, size};
    WebPDemuxer *demuxer = WebPDemux(&input);
    if (demuxer == NULL) {
        return demux_failure(&input, message, message_size);
    }
    *count = WebPDemuxGetI(demuxer, WEBP_FF_FRAME_COUNT);
    WebPDemuxDelete(demuxer);
    if (*count == 0) {
        snprintf(message, message_size, "the WebP has no frames");
        return CACHALOT_IMAGE_CORRUPT;
    }
    return CACHALOT_IMAGE_OK;
}

struct cachalot_webp_animation {
    WebPAnimEncoder *encoder;
    WebPConfig config;
    int width;
    int height;
    /// Where the next frame starts, in milliseconds.
    int64_t timestamp;
    uint32_t frame_count;
};

cachalot_webp_animation *cachalot_webp_animation_start(
    uint32_t width, uint32_t height, uint32_t loop_count, int quality, char *message, size_t message_size) {
    cachalot_webp_animation *animation = calloc(1, sizeof *animation);
    WebPAnimEncoderOptions options;
    if (animation == NULL) {
        snprintf(message, message_size, "out of memory");
        return NULL;
    }
    if (!WebPAnimEncoderOptionsInit(&options) || !WebPConfigInit(&animation->config)) {
        snprintf(message, message_size, "libwebp's version does not match its headers");
        free(animation);
        return NULL;
    }
    options.anim_params.loop_count = (int)(loop_count > 65535 ? 65535 : loop_count);
    options.anim_params.bgcolor = 0;
    animation->config.quality = (float)(quality < 0 ? 0 : quality > 100 ? 100 : quality);
    animation->width = (int)width;
    animation->height = (int)height;
    animation->encoder = width > 0 && height > 0 && width <= 16383 && height <= 16383
                             ? WebPAnimEncoderNew((int)width, (int)height, &options)
                             : NULL;
    if (animation->encoder == NULL) {
        snprintf(message, message_size, "libwebp could not encode an animation of %ux%u pixels", width, height);
        free(animation);
        return NULL;
    }
    return animation;
}

cachalot_image_status cachalot_webp_animation_add(
    cachalot_webp_animation *animation, const cachalot_pixels *frame, uint32_t duration, char *message,
    size_t message_size) {
    animation->frame_count++;
    if ((int)frame->width != animation->width || (int)frame->height != animation->height) {
        snprintf(message, message_size, "frame %u is %ux%u, not the canvas's %dx%d", animation->frame_count,
                 frame->width, frame->height, animation->width, animation->height);
        return CACHALOT_IMAGE_UNSUPPORTED;
    }
    uint8_t *copy = frame->channels == 4 ? NULL : cachalot_rgba_copy(frame);
    WebPPicture picture;
    if (!WebPPictureInit(&picture) || (frame->channels != 4 && copy == NULL)) {
        free(copy);
        return failed(VP8_STATUS_OUT_OF_MEMORY, message, message_size);
    }
    picture.width = animation->width;
    picture.height = animation->height;
    picture.use_argb = 1;
    int imported = copy != NULL ? WebPPictureImportRGBA(&picture, copy, animation->width * 4)
                                : WebPPictureImportRGBA(&picture, frame->pixels, (int)frame->bytes_per_row);
    free(copy);
    cachalot_image_status status = CACHALOT_IMAGE_OK;
    if (!imported) {
        status = failed(VP8_STATUS_OUT_OF_MEMORY, message, message_size);
    } else if (!WebPAnimEncoderAdd(animation->encoder, &picture, (int)animation->timestamp, &animation->config)) {
        snprintf(message, message_size, "libwebp could not encode frame %u: %s", animation->frame_count,
                 WebPAnimEncoderGetError(animation->encoder));
        status = CACHALOT_IMAGE_UNSUPPORTED;
    }
    WebPPictureFree(&picture);
    // A WebP frame lasts at most 2^24 - 1 ms (its field's 24 bits); libwebp's timestamps are
    // ints: an animation longer than 24 days stops growing there.
    animation->timestamp += duration < 0xFFFFFF ? duration : 0xFFFFFF;
    if (animation->timestamp > INT32_MAX) {
        animation->timestamp = INT32_MAX;
    }
    return status;
}

cachalot_image_status cachalot_webp_animation_finish(
    cachalot_webp_animation *animation, uint8_t **out, size_t *out_size, char *message, size_t message_size) {
    cachalot_image_status status = CACHALOT_IMAGE_OK;
    WebPData assembled;
    WebPDataInit(&assembled);
    if (out == NULL) {
        // Abandoned.
    } else if (animation->frame_count == 0) {
        snprintf(message, message_size, "an animation has at least one frame");
        status = CACHALOT_IMAGE_UNSUPPORTED;
    } else if (!WebPAnimEncoderAdd(animation->encoder, NULL, (int)animation->timestamp, NULL) ||
               !WebPAnimEncoderAssemble(animation->encoder, &assembled)) {
        snprintf(message, message_size, "libwebp could not assemble the animation: %s",
                 WebPAnimEncoderGetError(animation->encoder));
        status = CACHALOT_IMAGE_UNSUPPORTED;
    } else if ((*out = malloc(assembled.size)) == NULL) {
        status = failed(VP8_STATUS_OUT_OF_MEMORY, message, message_size);
    } else {
        memcpy(*out, assembled.bytes, assembled.size);
        *out_size = assembled.size;
    }
    WebPDataClear(&assembled);
    WebPAnimEncoderDelete(animation->encoder);
    free(animation);
    return status;
}
