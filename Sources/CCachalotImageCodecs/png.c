#include "ImageCodecs.h"
#include "reducer.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

/// Where libpng reads from or writes to, where it jumps back to, and what went wrong.
typedef struct {
    jmp_buf jump;
    const uint8_t *input;
    size_t input_size;
    size_t offset;
    int truncated;
    uint8_t *output;
    size_t output_size;
    size_t output_capacity;
    // Owned until returned; freed after a jump.
    uint8_t *pixels;
    png_bytep *rows;
    cachalot_reducer reducer;
    char *message;
    size_t message_size;
} stream;

static void fail(png_structp png, png_const_charp text) {
    stream *s = png_get_error_ptr(png);
    if (!s->truncated) {
        snprintf(s->message, s->message_size, "%s", text);
    }
    longjmp(s->jump, 1);
}

static void warn(png_structp png, png_const_charp text) {
    (void)png;
    (void)text;
}

static void read_bytes(png_structp png, png_bytep bytes, size_t count) {
    stream *s = png_get_io_ptr(png);
    if (count > s->input_size - s->offset) {
        s->truncated = 1;
        snprintf(s->message, s->message_size, "the data ends before the PNG does");
        png_error(png, "truncated");
    }
    memcpy(bytes, s->input + s->offset, count);
    s->offset += count;
}

static void write_bytes(png_structp png, png_bytep bytes, size_t count) {
    stream *s = png_get_io_ptr(png);
    if (count > s->output_capacity - s->output_size) {
        size_t capacity = s->output_capacity * 2 > s->output_size + count ? s->output_capacity * 2
                                                                          : s->output_size + count;
        uint8_t *grown = realloc(s->output, capacity);
        if (grown == NULL) {
            png_error(png, "out of memory");
        }
        s->output = grown;
        s->output_capacity = capacity;
    }
    memcpy(s->output + s->output_size, bytes, count);
    s->output_size += count;
}

static void flush_bytes(png_structp png) { (void)png; }

cachalot_image_status cachalot_png_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t factor, cachalot_pixels *out,
    char *message, size_t message_size) {
    stream s;
    memset(&s, 0, sizeof s);
    s.input = data;
    s.input_size = size;
    s.message = message;
    s.message_size = message_size;
    if (size < 8 || png_sig_cmp(data, 0, 8) != 0) {
        snprintf(message, message_size, "the data does not start with a PNG signature");
        return CACHALOT_IMAGE_CORRUPT;
    }
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, fail, warn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (info == NULL) {
        png_destroy_read_struct(&png, NULL, NULL);
        snprintf(message, message_size, "out of memory");
        return CACHALOT_IMAGE_OUT_OF_MEMORY;
    }
    if (setjmp(s.jump)) {
        png_destroy_read_struct(&png, &info, NULL);
        free(s.pixels);
        free(s.rows);
        cachalot_reducer_free(&s.reducer);
        return s.truncated ? CACHALOT_IMAGE_TRUNCATED : CACHALOT_IMAGE_CORRUPT;
    }
    png_set_read_fn(png, &s, read_bytes);
    png_read_info(png, info);
    png_uint_32 width = png_get_image_width(png, info);
    png_uint_32 height = png_get_image_height(png, info);
    if ((uint64_t)width * height > maximum_pixels) {
        snprintf(message, message_size, "the PNG declares %ux%u pixels, more than the %llu allowed", width, height,
                 (unsigned long long)maximum_pixels);
        png_destroy_read_struct(&png, &info, NULL);
        return CACHALOT_IMAGE_TOO_LARGE;
    }
    int color = png_get_color_type(png, info);
    int depth = png_get_bit_depth(png, info);
    int transparent = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    int gray = (color & PNG_COLOR_MASK_COLOR) == 0;
    if (depth == 16) {
        png_set_strip_16(png);
    }
    if (color == PNG_COLOR_TYPE_PALETTE) {
        png_set_palette_to_rgb(png);
    }
    if (gray && depth < 8) {
        png_set_expand_gray_1_2_4_to_8(png);
    }
    if (transparent) {
        png_set_tRNS_to_alpha(png);
    }
    int channels = 4;
    if (gray && (color & PNG_COLOR_MASK_ALPHA) == 0 && !transparent) {
        channels = 1;
    } else {
        if (gray) {
            png_set_gray_to_rgb(png);
        }
        if ((color & PNG_COLOR_MASK_ALPHA) == 0 && !transparent) {
            png_set_filler(png, 0xFF, PNG_FILLER_AFTER);
        }
    }
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t row_bytes = (size_t)width * (size_t)channels;
    if (png_get_rowbytes(png, info) != row_bytes) {
        png_error(png, "unexpected row size after conversion");
    }
    factor = factor < 1 ? 1 : factor > CACHALOT_MAXIMUM_REDUCTION ? CACHALOT_MAXIMUM_REDUCTION : factor;
    int weighted = (color & PNG_COLOR_MASK_ALPHA) != 0 || transparent;
    if (factor > 1 && !cachalot_reducer_start(&s.reducer, width, height, (uint32_t)channels, factor, weighted)) {
        png_error(png, "out of memory");
    }
    // Rows go one by one into the reduction; an interlaced image, whose passes each cover the
    // whole picture, and one kept at full size are decoded whole.
    int streamed = factor > 1 && passes == 1;
    s.pixels = malloc(row_bytes * (streamed ? 1 : height));
    s.rows = malloc(sizeof(png_bytep) * (streamed ? 1 : height));
    if (s.pixels == NULL || s.rows == NULL) {
        png_error(png, "out of memory");
    }
    if (streamed) {
        for (png_uint_32 y = 0; y < height; y++) {
            png_read_row(png, s.pixels, NULL);
            cachalot_reducer_add_row(&s.reducer, s.pixels);
        }
    } else {
        for (png_uint_32 y = 0; y < height; y++) {
            s.rows[y] = s.pixels + row_bytes * y;
        }
        png_read_image(png, s.rows);
        for (png_uint_32 y = 0; factor > 1 && y < height; y++) {
            cachalot_reducer_add_row(&s.reducer, s.rows[y]);
        }
    }
    png_destroy_read_struct(&png, &info, NULL);
    free(s.rows);
    if (factor > 1) {
        free(s.pixels);
        *out = s.reducer.out;
        s.reducer.out.pixels = NULL;
        cachalot_reducer_free(&s.reducer);
        return CACHALOT_IMAGE_OK;
    }
    out->pixels = s.pixels;
    out->width = width;
    out->height = height;
    out->bytes_per_row = (uint32_t)row_bytes;
    out->channels = (uint32_t)channels;
    return CACHALOT_IMAGE_OK;
}

cachalot_image_status cachalot_png_encode(
    const cachalot_pixels *image, uint8_t **out, size_t *out_size, char *message, size_t message_size) {
    stream s;
    memset(&s, 0, sizeof s);
    s.message = message;
    s.message_size = message_size;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &s, fail, warn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (info == NULL) {
        png_destroy_write_struct(&png, NULL);
        snprintf(message, message_size, "out of memory");
        return CACHALOT_IMAGE_OUT_OF_MEMORY;
    }
    if (setjmp(s.jump)) {
        png_destroy_write_struct(&png, &info);
        free(s.output);
        free(s.rows);
        return CACHALOT_IMAGE_CORRUPT;
    }
    png_set_write_fn(png, &s, write_bytes, flush_bytes);
    png_set_IHDR(png, info, image->width, image->height, 8,
                 image->channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    s.rows = malloc(sizeof(png_bytep) * (image->height ? image->height : 1));
    if (s.rows == NULL) {
        png_error(png, "out of memory");
    }
    for (uint32_t y = 0; y < image->height; y++) {
        s.rows[y] = image->pixels + (size_t)image->bytes_per_row * y;
    }
    png_write_image(png, s.rows);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(s.rows);
    *out = s.output;
    *out_size = s.output_size;
    return CACHALOT_IMAGE_OK;
}
