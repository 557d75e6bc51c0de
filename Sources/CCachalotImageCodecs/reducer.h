// A box reduction fed row by row, as a decoder makes the rows: the image at full size never has
// to exist. Private to the codecs; Swift reaches it through cachalot_box_reduce.

#ifndef CACHALOT_REDUCER_H
#define CACHALOT_REDUCER_H

#include "ImageCodecs.h"

/// The largest factor a reducer takes: a block's sums fit in 64 bits, and a row's in 32.
#define CACHALOT_MAXIMUM_REDUCTION 65536

/// Shrinks an image of `source_width` × `source_height` pixels by a whole `factor`: each pixel
/// out is the rounded mean of a `factor` × `factor` block (smaller at the right and bottom
/// edges). With `weighted` (RGBA only), the colors are averaged weighted by alpha, so that a
/// transparent pixel lends no color to its block: the mean of premultiplied pixels, stored
/// unpremultiplied. For opaque pixels both means are the same.
typedef struct {
    /// The image out, complete once `source_height` rows were added; `pixels` is allocated with
    /// malloc, and is the caller's once taken (set to NULL).
    cachalot_pixels out;
    /// The sums of the block row being filled, 4 a pixel out (1 for gray).
    uint64_t *sums;
    uint32_t source_width;
    uint32_t source_height;
    uint32_t factor;
    int weighted;
    /// The rows added so far.
    uint32_t rows;
} cachalot_reducer;

/// Starts a reduction of pixels of `channels` (1 or 4) bytes; returns 0 if memory ran out, with
/// nothing left to free. `factor` is at least 1 and at most CACHALOT_MAXIMUM_REDUCTION.
int cachalot_reducer_start(
    cachalot_reducer *reducer, uint32_t source_width, uint32_t source_height, uint32_t channels, uint32_t factor,
    int weighted);

/// Adds the next row of `source_width` pixels; at most `source_height` rows are taken.
void cachalot_reducer_add_row(cachalot_reducer *reducer, const uint8_t *row);

/// Frees what the reducer holds, the pixels out too unless they were taken.
void cachalot_reducer_free(cachalot_reducer *reducer);

#endif
