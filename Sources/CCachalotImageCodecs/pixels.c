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
