#include "ImageCodecs.h"
#include "reducer.h"

#include <stdlib.h>
#include <string.h>

void cachalot_animation_free(cachalot_animation *animation) {
    if (animation->frames != NULL) {
        for (uint32_t i = 0; i < animation->frame_count; i++) {
            free(animation->frames[i].pixels);
        }
    }
    free(animation->frames);
    free(animation->durations);
    memset(animation, 0, sizeof *animation);
}

int cachalot_has_alpha(const cachalot_pixels *image) {
    if (image->channels != 4) {
        return 0;
    }
    for (uint32_t y = 0; y < image->height; y++) {
        const uint8_t *row = image->pixels + (size_t)image->bytes_per_row * y;
        for (uint32_t x = 0; x < image->width; x++) {
            if (row[4 * (size_t)x + 3] != 255) {
                return 1;
            }
        }
    }
    return 0;
}

uint8_t *cachalot_rgba_copy(const cachalot_pixels *image) {
    size_t row_bytes = (size_t)image->width * 4;
    uint8_t *rgba = malloc(row_bytes * image->height);
    if (rgba == NULL) {
        return NULL;
    }
    for (uint32_t y = 0; y < image->height; y++) {
        const uint8_t *row = image->pixels + (size_t)image->bytes_per_row * y;
        uint8_t *to = rgba + row_bytes * y;
        if (image->channels == 4) {
            memcpy(to, row, row_bytes);
            continue;
        }
        for (uint32_t x = 0; x < image->width; x++) {
            to[4 * (size_t)x] = to[4 * (size_t)x + 1] = to[4 * (size_t)x + 2] = row[x];
            to[4 * (size_t)x + 3] = 255;
        }
    }
    return rgba;
}

int cachalot_reducer_start(
    cachalot_reducer *reducer, uint32_t source_width, uint32_t source_height, uint32_t channels, uint32_t factor,
    int weighted) {
    memset(reducer, 0, sizeof *reducer);
    uint32_t width = source_width / factor + (source_width % factor != 0);
    uint32_t height = source_height / factor + (source_height % factor != 0);
    size_t row_bytes = (size_t)width * channels;
    reducer->out = (cachalot_pixels){malloc(row_bytes * height), width, height, (uint32_t)row_bytes, channels};
    reducer->sums = calloc(row_bytes, sizeof(uint64_t));
    if (reducer->out.pixels == NULL || reducer->sums == NULL) {
        cachalot_reducer_free(reducer);
        return 0;
    }
    reducer->source_width = source_width;
    reducer->source_height = source_height;
    reducer->factor = factor;
    reducer->weighted = weighted && channels == 4;
    return 1;
}

/// Adds `count` pixels of 4 channels from `from` to `sum`, weighting colors by alpha or not.
static inline void add_rgba(uint64_t *sum, const uint8_t *from, uint32_t count, int weighted) {
    // A row of a block sums in 32 bits: count × 255 × 255 fits for count up to 66,051.
    uint32_t r = 0, g = 0, b = 0, a = 0;
    if (weighted) {
        for (uint32_t k = 0; k < count; k++, from += 4) {
            r += (uint32_t)from[0] * from[3];
            g += (uint32_t)from[1] * from[3];
            b += (uint32_t)from[2] * from[3];
            a += from[3];
        }
    } else {
        for (uint32_t k = 0; k < count; k++, from += 4) {
            r += from[0];
            g += from[1];
            b += from[2];
            a += from[3];
        }
    }
    sum[0] += r;
    sum[1] += g;
    sum[2] += b;
    sum[3] += a;
}

/// Writes the block row summed so far, of `rows` rows, as the next row out, and clears the sums.
static void emit_row(cachalot_reducer *reducer, uint32_t rows) {
    uint32_t channels = reducer->out.channels;
    uint8_t *to = reducer->out.pixels + (size_t)reducer->out.bytes_per_row * ((reducer->rows - 1) / reducer->factor);
    uint64_t *sum = reducer->sums;
    for (uint32_t ox = 0; ox < reducer->out.width; ox++, sum += channels, to += channels) {
        uint32_t left = reducer->source_width - ox * reducer->factor;
        uint64_t count = (uint64_t)(left < reducer->factor ? left : reducer->factor) * rows;
        if (reducer->weighted) {
            uint64_t alpha = sum[3];
            for (uint32_t c = 0; c < 3; c++) {
                to[c] = alpha == 0 ? 0 : (uint8_t)((sum[c] + alpha / 2) / alpha);
            }
            to[3] = (uint8_t)((alpha + count / 2) / count);
        } else {
            for (uint32_t c = 0; c < channels; c++) {
                to[c] = (uint8_t)((sum[c] + count / 2) / count);
            }
        }
    }
    memset(reducer->sums, 0, (size_t)reducer->out.bytes_per_row * sizeof(uint64_t));
}

void cachalot_reducer_add_row(cachalot_reducer *reducer, const uint8_t *row) {
    if (reducer->rows == reducer->source_height) {
        return;
    }
    uint32_t factor = reducer->factor;
    uint32_t width = reducer->source_width;
    uint64_t *sum = reducer->sums;
    if (reducer->out.channels == 4) {
        for (uint32_t x = 0; x < width; x += factor, sum += 4) {
            add_rgba(sum, row + (size_t)x * 4, width - x < factor ? width - x : factor, reducer->weighted);
        }
    } else {
        for (uint32_t x = 0; x < width; x += factor, sum++) {
            uint32_t count = width - x < factor ? width - x : factor;
            uint32_t total = 0;
            for (uint32_t k = 0; k < count; k++) {
                total += row[x + k];
            }
            *sum += total;
        }
    }
    reducer->rows++;
    uint32_t in_block = (reducer->rows - 1) % factor + 1;
    if (in_block == factor || reducer->rows == reducer->source_height) {
        emit_row(reducer, in_block);
    }
}

void cachalot_reducer_free(cachalot_reducer *reducer) {
    free(reducer->out.pixels);
    free(reducer->sums);
    reducer->out.pixels = NULL;
    reducer->sums = NULL;
}

int cachalot_box_reduce(const cachalot_pixels *image, uint32_t factor, cachalot_pixels *out) {
    cachalot_reducer reducer;
    uint32_t bounded = factor < CACHALOT_MAXIMUM_REDUCTION ? factor : CACHALOT_MAXIMUM_REDUCTION;
    if (!cachalot_reducer_start(&reducer, image->width, image->height, image->channels, bounded, 0)) {
        return 0;
    }
    for (uint32_t y = 0; y < image->height; y++) {
        cachalot_reducer_add_row(&reducer, image->pixels + (size_t)image->bytes_per_row * y);
    }
    *out = reducer.out;
    reducer.out.pixels = NULL;
    cachalot_reducer_free(&reducer);
    return 1;
}
