#include "ImageCodecs.h"

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

int cachalot_box_reduce(const cachalot_pixels *image, uint32_t factor, cachalot_pixels *out) {
    uint32_t channels = image->channels;
    uint32_t width = (image->width + factor - 1) / factor;
    uint32_t height = (image->height + factor - 1) / factor;
    size_t row_bytes = (size_t)width * channels;
    uint8_t *pixels = malloc(row_bytes * height);
    uint32_t *sums = malloc(row_bytes * sizeof(uint32_t));
    if (pixels == NULL || sums == NULL) {
        free(pixels);
        free(sums);
        return 0;
    }
    for (uint32_t oy = 0; oy < height; oy++) {
        uint32_t first = oy * factor;
        uint32_t rows = image->height - first < factor ? image->height - first : factor;
        memset(sums, 0, row_bytes * sizeof(uint32_t));
        for (uint32_t y = first; y < first + rows; y++) {
            const uint8_t *row = image->pixels + (size_t)image->bytes_per_row * y;
            for (uint32_t x = 0; x < image->width; x++) {
                uint32_t *sum = sums + (size_t)(x / factor) * channels;
                for (uint32_t c = 0; c < channels; c++) {
                    sum[c] += row[(size_t)x * channels + c];
                }
            }
        }
        uint8_t *to = pixels + row_bytes * oy;
        for (uint32_t ox = 0; ox < width; ox++) {
            uint32_t columns = image->width - ox * factor < factor ? image->width - ox * factor : factor;
            uint32_t count = columns * rows;
            for (uint32_t c = 0; c < channels; c++) {
                to[(size_t)ox * channels + c] = (uint8_t)((sums[(size_t)ox * channels + c] + count / 2) / count);
            }
        }
    }
    free(sums);
    *out = (cachalot_pixels){pixels, width, height, (uint32_t)row_bytes, channels};
    return 1;
}
