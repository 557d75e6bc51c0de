#include "ImageCodecs.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

/// libjpeg's error manager, with the place to jump back to and what the data did wrong.
typedef struct {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    int truncated;
    char *message;
    size_t message_size;
} guard;

static void fail(j_common_ptr info) {
    guard *g = (guard *)info->err;
    char text[JMSG_LENGTH_MAX];
    (*info->err->format_message)(info, text);
    snprintf(g->message, g->message_size, "%s", text);
    longjmp(g->jump, 1);
}

/// Warnings are kept quiet; the one that matters, data ending early, is remembered.
static void warn(j_common_ptr info, int level) {
    guard *g = (guard *)info->err;
    if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF) {
        g->truncated = 1;
    }
}

static void install(guard *g, char *message, size_t message_size) {
    jpeg_std_error(&g->manager);
    g->manager.error_exit = fail;
    g->manager.emit_message = warn;
    g->truncated = 0;
    g->message = message;
    g->message_size = message_size;
}

cachalot_image_status cachalot_jpeg_size(
    const uint8_t *data, size_t size, uint32_t *width, uint32_t *height, char *message, size_t message_size) {
    struct jpeg_decompress_struct info;
    guard g;
    install(&g, message, message_size);
    info.err = &g.manager;
    if (setjmp(g.jump)) {
        jpeg_destroy_decompress(&info);
        return CACHALOT_IMAGE_CORRUPT;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    *width = info.image_width;
    *height = info.image_height;
    int truncated = g.truncated;
    jpeg_destroy_decompress(&info);
    if (truncated) {
        snprintf(message, message_size, "the data ends inside the JPEG header");
        return CACHALOT_IMAGE_TRUNCATED;
    }
    return CACHALOT_IMAGE_OK;
}

cachalot_image_status cachalot_jpeg_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, unsigned scale_denominator,
    cachalot_pixels *out, char *message, size_t message_size) {
    struct jpeg_decompress_struct info;
    guard g;
    // Read after a jump: kept in memory, not in a register setjmp would restore.
    uint8_t *volatile pixels = NULL;
    install(&g, message, message_size);
    info.err = &g.manager;
    if (setjmp(g.jump)) {
        jpeg_destroy_decompress(&info);
        free(pixels);
        return CACHALOT_IMAGE_CORRUPT;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    if ((uint64_t)info.image_width * info.image_height > maximum_pixels) {
        snprintf(message, message_size, "the JPEG declares %ux%u pixels, more than the %llu allowed",
                 info.image_width, info.image_height, (unsigned long long)maximum_pixels);
        jpeg_destroy_decompress(&info);
        return CACHALOT_IMAGE_TOO_LARGE;
    }
    switch (info.jpeg_color_space) {
    case JCS_GRAYSCALE:
        info.out_color_space = JCS_GRAYSCALE;
        break;
    case JCS_CMYK:
    case JCS_YCCK:
        snprintf(message, message_size, "CMYK JPEGs are not supported");
        jpeg_destroy_decompress(&info);
        return CACHALOT_IMAGE_UNSUPPORTED;
    default:
        info.out_color_space = JCS_EXT_RGBA;
    }
    info.scale_num = 1;
    info.scale_denom = scale_denominator;
    // Block smoothing guesses the AC coefficients a progressive JPEG has not sent yet. At 1/8
    // the AC scans that JPEGScans leaves out are those of components decoded from their DC
    // alone, where a guess changes nothing but costs a pass over every block.
    if (scale_denominator == 8) {
        info.do_block_smoothing = FALSE;
    }
    jpeg_start_decompress(&info);
    size_t row_bytes = (size_t)info.output_width * (size_t)info.output_components;
    pixels = malloc(row_bytes * info.output_height);
    if (pixels == NULL) {
        jpeg_destroy_decompress(&info);
        snprintf(message, message_size, "out of memory for %ux%u pixels", info.output_width, info.output_height);
        return CACHALOT_IMAGE_OUT_OF_MEMORY;
    }
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = pixels + row_bytes * info.output_scanline;
        jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    out->pixels = pixels;
    out->width = info.output_width;
    out->height = info.output_height;
    out->bytes_per_row = (uint32_t)row_bytes;
    out->channels = (uint32_t)info.output_components;
    int truncated = g.truncated;
    jpeg_destroy_decompress(&info);
    if (truncated) {
        free(pixels);
        out->pixels = NULL;
        snprintf(message, message_size, "the data ends before the JPEG's last pixels");
        return CACHALOT_IMAGE_TRUNCATED;
    }
    return CACHALOT_IMAGE_OK;
}

cachalot_image_status cachalot_jpeg_encode(
    const cachalot_pixels *image, int quality, int progressive, uint8_t **out, size_t *out_size,
    char *message, size_t message_size) {
    struct jpeg_compress_struct info;
    guard g;
    // libjpeg grows this buffer as it writes; its address is taken, so it stays in memory and
    // can be freed after a jump.
    struct {
        unsigned char *bytes;
        unsigned long length;
    } buffer = {NULL, 0};
    install(&g, message, message_size);
    info.err = &g.manager;
    if (setjmp(g.jump)) {
        jpeg_destroy_compress(&info);
        free(buffer.bytes);
        return CACHALOT_IMAGE_CORRUPT;
    }
    jpeg_create_compress(&info);
    jpeg_mem_dest(&info, &buffer.bytes, &buffer.length);
    info.image_width = image->width;
    info.image_height = image->height;
    info.input_components = (int)image->channels;
    info.in_color_space = image->channels == 1 ? JCS_GRAYSCALE : JCS_EXT_RGBA;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, quality, TRUE);
    if (progressive) {
        jpeg_simple_progression(&info);
    }
    jpeg_start_compress(&info, TRUE);
    while (info.next_scanline < info.image_height) {
        JSAMPROW row = image->pixels + (size_t)image->bytes_per_row * info.next_scanline;
        jpeg_write_scanlines(&info, &row, 1);
    }
    jpeg_finish_compress(&info);
    jpeg_destroy_compress(&info);
    *out = buffer.bytes;
    *out_size = buffer.length;
    return CACHALOT_IMAGE_OK;
}
