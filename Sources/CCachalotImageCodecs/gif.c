#include "ImageCodecs.h"
#include "reducer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>

typedef struct {
    const uint8_t *data;
    size_t size;
    size_t offset;
    /// Whether giflib asked for bytes past the end.
    int ended;
} source;

static int read_bytes(GifFileType *gif, GifByteType *bytes, int count) {
    source *s = gif->UserData;
    size_t available = s->size - s->offset;
    size_t n = (size_t)count < available ? (size_t)count : available;
    s->ended |= n < (size_t)count;
    memcpy(bytes, s->data + s->offset, n);
    s->offset += n;
    return (int)n;
}

/// The status and message for a giflib error code; any error after a read past the end is a
/// truncation.
static cachalot_image_status failed(int error, const source *s, char *message, size_t message_size) {
    switch (s && s->ended ? D_GIF_ERR_EOF_TOO_SOON : error) {
    case D_GIF_ERR_READ_FAILED:
    case D_GIF_ERR_EOF_TOO_SOON:
        snprintf(message, message_size, "the data ends before the GIF does");
        return CACHALOT_IMAGE_TRUNCATED;
    case D_GIF_ERR_NOT_ENOUGH_MEM:
        snprintf(message, message_size, "out of memory");
        return CACHALOT_IMAGE_OUT_OF_MEMORY;
    default: {
        const char *text = GifErrorString(error);
        snprintf(message, message_size, "the GIF is damaged: %s", text ? text : "unknown error");
        return CACHALOT_IMAGE_CORRUPT;
    }
    }
}

/// What the graphic control extension before a frame says about it.
typedef struct {
    int disposal;
    int transparent;
    int delay; // in hundredths of a second
} control;

/// Reads the extension whose code giflib just read; fills `next` from a graphic control
/// extension, and `repeats` from a NETSCAPE2.0 application extension (the times the animation
/// is shown again after the first; 0 for ever).
static int read_extension(GifFileType *gif, int code, GifByteType *block, control *next, uint32_t *repeats) {
    int application = 0;
    int first = 1;
    while (block != NULL) {
        if (code == GRAPHICS_EXT_FUNC_CODE && first) {
            GraphicsControlBlock gcb;
            if (DGifExtensionToGCB(block[0], block + 1, &gcb) == GIF_OK) {
                next->disposal = gcb.DisposalMode;
                next->transparent = gcb.TransparentColor;
                next->delay = gcb.DelayTime;
            }
        } else if (code == APPLICATION_EXT_FUNC_CODE && first) {
            application = block[0] == 11 && (memcmp(block + 1, "NETSCAPE2.0", 11) == 0 ||
                                             memcmp(block + 1, "ANIMEXTS1.0", 11) == 0);
        } else if (application && block[0] >= 3 && block[1] == 1) {
            *repeats = (uint32_t)block[2] | (uint32_t)block[3] << 8;
        }
        first = 0;
        if (DGifGetExtensionNext(gif, &block) != GIF_OK) {
            return GIF_ERROR;
        }
    }
    return GIF_OK;
}

/// The colors of the frame giflib just read the descriptor of, as RGBA by index: an index past
/// the color table shows as opaque black, as browsers show it.
static void frame_colors(const GifFileType *gif, uint8_t colors[256][4]) {
    const ColorMapObject *map = gif->Image.ColorMap ? gif->Image.ColorMap : gif->SColorMap;
    for (int index = 0; index < 256; index++) {
        int known = index < map->ColorCount;
        colors[index][0] = known ? map->Colors[index].Red : 0;
        colors[index][1] = known ? map->Colors[index].Green : 0;
        colors[index][2] = known ? map->Colors[index].Blue : 0;
        colors[index][3] = 255;
    }
}

/// Paints one line of the frame's color indices onto its row of the canvas, clipped to the
/// canvas, skipping the transparent index.
static void paint_line(
    const GifFileType *gif, uint8_t *canvas_row, const uint8_t *indices, const uint8_t colors[256][4],
    int transparent) {
    const GifImageDesc *desc = &gif->Image;
    int count = desc->Left >= gif->SWidth                    ? 0
                : desc->Left + desc->Width > gif->SWidth ? gif->SWidth - desc->Left
                                                             : desc->Width;
    uint8_t *to = canvas_row + (size_t)desc->Left * 4;
    for (int x = 0; x < count; x++) {
        if (indices[x] != transparent) {
            memcpy(to + (size_t)x * 4, colors[indices[x]], 4);
        }
    }
}

/// The first line, and the step between lines, of each pass: an interlaced GIF gives its lines
/// in 4 passes.
static const int passes[4][2] = {{0, 8}, {4, 8}, {2, 4}, {1, 2}};

/// Draws the frame giflib is about to read onto `canvas`, line by line (interlaced or not),
/// clipped to the canvas, skipping the transparent index.
static int draw_frame(GifFileType *gif, uint8_t *canvas, uint8_t *line, const control *frame) {
    const GifImageDesc *desc = &gif->Image;
    uint8_t colors[256][4];
    frame_colors(gif, colors);
    for (int pass = 0; pass < (desc->Interlace ? 4 : 1); pass++) {
        int step = desc->Interlace ? passes[pass][1] : 1;
        for (int y = passes[pass][0]; y < desc->Height; y += step) {
            if (DGifGetLine(gif, line, desc->Width) != GIF_OK) {
                return GIF_ERROR;
            }
            if (desc->Top + y < gif->SHeight) {
                paint_line(gif, canvas + (size_t)(desc->Top + y) * gif->SWidth * 4, line, colors, frame->transparent);
            }
        }
    }
    return GIF_OK;
}

/// Draws the first frame, which giflib is about to read, onto a transparent canvas whose rows go
/// one by one into `reducer`: the canvas at full size never exists. The lines of an interlaced
/// frame are kept as indices, a byte a pixel, until the frame is whole.
static int reduce_first_frame(GifFileType *gif, uint8_t *line, const control *frame, cachalot_reducer *reducer) {
    const GifImageDesc *desc = &gif->Image;
    uint8_t colors[256][4];
    frame_colors(gif, colors);
    uint8_t *row = malloc((size_t)gif->SWidth * 4);
    uint8_t *indices = desc->Interlace ? malloc((size_t)desc->Width * desc->Height) : NULL;
    if (row == NULL || (desc->Interlace && indices == NULL)) {
        free(row);
        free(indices);
        gif->Error = D_GIF_ERR_NOT_ENOUGH_MEM;
        return GIF_ERROR;
    }
    int status = GIF_OK;
    for (int pass = 0; desc->Interlace && pass < 4; pass++) {
        for (int y = passes[pass][0]; status == GIF_OK && y < desc->Height; y += passes[pass][1]) {
            status = DGifGetLine(gif, indices + (size_t)y * desc->Width, desc->Width);
        }
    }
    for (int y = 0; status == GIF_OK && y < gif->SHeight; y++) {
        memset(row, 0, (size_t)gif->SWidth * 4);
        int frame_y = y - desc->Top;
        if (frame_y >= 0 && frame_y < desc->Height) {
            if (indices == NULL) {
                status = DGifGetLine(gif, line, desc->Width);
            }
            const uint8_t *from = indices ? indices + (size_t)frame_y * desc->Width : line;
            paint_line(gif, row, from, colors, frame->transparent);
        }
        cachalot_reducer_add_row(reducer, row);
    }
    free(row);
    free(indices);
    return status;
}

/// Clears the part of `canvas` a frame covered to transparent (disposal to background).
static void clear_rect(GifFileType *gif, uint8_t *canvas, const GifImageDesc *desc) {
    for (int y = desc->Top; y < desc->Top + desc->Height && y < gif->SHeight; y++) {
        if (desc->Left >= gif->SWidth) {
            return;
        }
        int end = desc->Left + desc->Width < gif->SWidth ? desc->Left + desc->Width : gif->SWidth;
        memset(canvas + ((size_t)y * gif->SWidth + desc->Left) * 4, 0, (size_t)(end - desc->Left) * 4);
    }
}

/// Decodes up to `maximum_frames` frames (0: all); with a `factor` over 1 (and `maximum_frames`
/// 1), the first frame shrunk by it as it is decoded.
static cachalot_image_status decode_frames(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t maximum_frames, uint32_t factor,
    cachalot_animation *out, char *message, size_t message_size) {
    memset(out, 0, sizeof *out);
    source s = {data, size, 0};
    int error = 0;
    GifFileType *gif = DGifOpen(&s, read_bytes, &error);
    if (gif == NULL) {
        return failed(error, &s, message, message_size);
    }
    uint64_t area = (uint64_t)gif->SWidth * (uint64_t)gif->SHeight;
    uint64_t frame_cost = area > CACHALOT_MINIMUM_FRAME_PIXELS ? area : CACHALOT_MINIMUM_FRAME_PIXELS;
    cachalot_image_status status = CACHALOT_IMAGE_OK;
    uint8_t *canvas = NULL;
    uint8_t *saved = NULL;
    uint8_t *line = NULL;
    uint32_t capacity = 0;
    control next = {DISPOSAL_UNSPECIFIED, NO_TRANSPARENT_COLOR, 0};
    // No NETSCAPE2.0 extension: shown once, as browsers show it.
    uint32_t repeats = UINT32_MAX;
    if (area == 0) {
        snprintf(message, message_size, "the GIF's canvas has no pixels");
        status = CACHALOT_IMAGE_CORRUPT;
    } else if (area > maximum_pixels) {
        snprintf(message, message_size, "the GIF declares %dx%d pixels, more than the %llu allowed", gif->SWidth,
                 gif->SHeight, (unsigned long long)maximum_pixels);
        status = CACHALOT_IMAGE_TOO_LARGE;
    } else {
        // A frame shrunk as it is decoded needs no canvas.
        canvas = factor > 1 ? NULL : calloc(area, 4);
        line = malloc(65536);
        if ((factor == 1 && canvas == NULL) || line == NULL) {
            status = failed(D_GIF_ERR_NOT_ENOUGH_MEM, &s, message, message_size);
        }
    }
    while (status == CACHALOT_IMAGE_OK && (maximum_frames == 0 || out->frame_count < maximum_frames)) {
        GifRecordType type;
        if (DGifGetRecordType(gif, &type) != GIF_OK) {
            // Many GIFs end without their trailer: after a whole frame, the end of the data ends it.
            if (out->frame_count == 0 || s.offset < s.size) {
                status = failed(gif->Error, &s, message, message_size);
            }
            break;
        }
        if (type == TERMINATE_RECORD_TYPE) {
            break;
        }
        if (type == EXTENSION_RECORD_TYPE) {
            int code;
            GifByteType *block;
            if (DGifGetExtension(gif, &code, &block) != GIF_OK ||
                read_extension(gif, code, block, &next, &repeats) != GIF_OK) {
                status = failed(gif->Error, &s, message, message_size);
            }
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE) {
            status = failed(D_GIF_ERR_WRONG_RECORD, &s, message, message_size);
            break;
        }
        if (DGifGetImageDesc(gif) != GIF_OK) {
            status = failed(gif->Error, &s, message, message_size);
            break;
        }
        GifImageDesc desc = gif->Image;
        if (desc.Width <= 0 || desc.Height <= 0 || desc.Left < 0 || desc.Top < 0) {
            snprintf(message, message_size, "a frame of the GIF has no pixels");
            status = CACHALOT_IMAGE_CORRUPT;
            break;
        }
        uint64_t count = (uint64_t)out->frame_count + 1;
        if ((uint64_t)desc.Width * (uint64_t)desc.Height > maximum_pixels ||
            (count > 1 ? frame_cost : area) * count > maximum_pixels) {
            snprintf(message, message_size,
                     "the GIF's frames take more than the %llu pixels allowed (%dx%d, frame %u)",
                     (unsigned long long)maximum_pixels, gif->SWidth, gif->SHeight, out->frame_count + 1);
            status = CACHALOT_IMAGE_TOO_LARGE;
            break;
        }
        if (desc.ColorMap == NULL && gif->SColorMap == NULL) {
            snprintf(message, message_size, "a frame of the GIF has no color table");
            status = CACHALOT_IMAGE_CORRUPT;
            break;
        }
        if (out->frame_count == capacity) {
            capacity = capacity ? capacity * 2 : 4;
            cachalot_pixels *frames = realloc(out->frames, capacity * sizeof(cachalot_pixels));
            if (frames != NULL) {
                out->frames = frames;
            }
            uint32_t *durations = realloc(out->durations, capacity * sizeof(uint32_t));
            if (durations != NULL) {
                out->durations = durations;
            }
            if (frames == NULL || durations == NULL) {
                status = failed(D_GIF_ERR_NOT_ENOUGH_MEM, &s, message, message_size);
                break;
            }
        }
        // The last frame asked for takes the canvas itself; the others, a copy of it.
        int last = maximum_frames != 0 && out->frame_count + 1 == maximum_frames;
        uint8_t *pixels = last ? NULL : malloc(area * 4);
        if (next.disposal == DISPOSE_PREVIOUS && !last && saved == NULL) {
            saved = malloc(area * 4);
        }
        if ((!last && pixels == NULL) || (next.disposal == DISPOSE_PREVIOUS && !last && saved == NULL)) {
            free(pixels);
            status = failed(D_GIF_ERR_NOT_ENOUGH_MEM, &s, message, message_size);
            break;
        }
        if (next.disposal == DISPOSE_PREVIOUS && !last) {
            memcpy(saved, canvas, area * 4);
        }
        cachalot_reducer reducer;
        if (factor > 1) {
            int weighted = next.transparent != NO_TRANSPARENT_COLOR || desc.Left > 0 || desc.Top > 0 ||
                           desc.Left + desc.Width < gif->SWidth || desc.Top + desc.Height < gif->SHeight;
            if (!cachalot_reducer_start(&reducer, (uint32_t)gif->SWidth, (uint32_t)gif->SHeight, 4, factor,
                                        weighted)) {
                status = failed(D_GIF_ERR_NOT_ENOUGH_MEM, &s, message, message_size);
                break;
            }
            if (reduce_first_frame(gif, line, &next, &reducer) != GIF_OK) {
                cachalot_reducer_free(&reducer);
                status = failed(gif->Error, &s, message, message_size);
                break;
            }
            out->frames[0] = reducer.out;
            reducer.out.pixels = NULL;
            cachalot_reducer_free(&reducer);
        } else if (draw_frame(gif, canvas, line, &next) != GIF_OK) {
            free(pixels);
            status = failed(gif->Error, &s, message, message_size);
            break;
        } else if (last) {
            out->frames[out->frame_count] = (cachalot_pixels){canvas, (uint32_t)gif->SWidth, (uint32_t)gif->SHeight,
                                                              (uint32_t)gif->SWidth * 4, 4};
            canvas = NULL;
        } else {
            memcpy(pixels, canvas, area * 4);
            out->frames[out->frame_count] =
                (cachalot_pixels){pixels, (uint32_t)gif->SWidth, (uint32_t)gif->SHeight, (uint32_t)gif->SWidth * 4, 4};
        }
        // Browsers show a delay of 0 or 10 ms as 100 ms; so does this.
        out->durations[out->frame_count] = next.delay <= 1 ? 100 : (uint32_t)next.delay * 10;
        out->frame_count++;
        if (last) {
            break;
        } else if (next.disposal == DISPOSE_BACKGROUND) {
            clear_rect(gif, canvas, &desc);
        } else if (next.disposal == DISPOSE_PREVIOUS) {
            memcpy(canvas, saved, area * 4);
        }
        next = (control){DISPOSAL_UNSPECIFIED, NO_TRANSPARENT_COLOR, 0};
    }
    if (status == CACHALOT_IMAGE_OK && out->frame_count == 0) {
        snprintf(message, message_size, "the GIF has no frames");
        status = CACHALOT_IMAGE_CORRUPT;
    }
    // The extension counts the times shown again after the first (0: for ever); the animation
    // counts the times shown, as gif2webp converts it.
    out->loop_count = repeats == UINT32_MAX ? 1 : repeats == 0 ? 0 : repeats + 1;
    free(canvas);
    free(saved);
    free(line);
    DGifCloseFile(gif, &error);
    if (status != CACHALOT_IMAGE_OK) {
        cachalot_animation_free(out);
    }
    return status;
}

cachalot_image_status cachalot_gif_decode_animation(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t maximum_frames,
    cachalot_animation *out, char *message, size_t message_size) {
    return decode_frames(data, size, maximum_pixels, maximum_frames, 1, out, message, message_size);
}

cachalot_image_status cachalot_gif_decode(
    const uint8_t *data, size_t size, uint64_t maximum_pixels, uint32_t factor, cachalot_pixels *out,
    char *message, size_t message_size) {
    cachalot_animation animation;
    factor = factor < 1 ? 1 : factor > CACHALOT_MAXIMUM_REDUCTION ? CACHALOT_MAXIMUM_REDUCTION : factor;
    cachalot_image_status status =
        decode_frames(data, size, maximum_pixels, 1, factor, &animation, message, message_size);
    if (status == CACHALOT_IMAGE_OK) {
        *out = animation.frames[0];
        animation.frames[0].pixels = NULL;
        cachalot_animation_free(&animation);
    }
    return status;
}

cachalot_image_status cachalot_gif_frame_count(
    const uint8_t *data, size_t size, uint32_t maximum, uint32_t *count, char *message, size_t message_size) {
    *count = 0;
    source s = {data, size, 0};
    int error = 0;
    GifFileType *gif = DGifOpen(&s, read_bytes, &error);
    if (gif == NULL) {
        return failed(error, &s, message, message_size);
    }
    cachalot_image_status status = CACHALOT_IMAGE_OK;
    // The records are walked as decode_frames walks them, the frames' data skipped undecoded.
    while (status == CACHALOT_IMAGE_OK && (maximum == 0 || *count < maximum)) {
        GifRecordType type;
        if (DGifGetRecordType(gif, &type) != GIF_OK) {
            if (*count == 0 || s.offset < s.size) {
                status = failed(gif->Error, &s, message, message_size);
            }
            break;
        }
        if (type == TERMINATE_RECORD_TYPE) {
            break;
        }
        GifByteType *block = NULL;
        int code;
        if (type == EXTENSION_RECORD_TYPE) {
            if (DGifGetExtension(gif, &code, &block) != GIF_OK) {
                status = failed(gif->Error, &s, message, message_size);
            }
            while (status == CACHALOT_IMAGE_OK && block != NULL) {
                if (DGifGetExtensionNext(gif, &block) != GIF_OK) {
                    status = failed(gif->Error, &s, message, message_size);
                }
            }
            continue;
        }
        if (type != IMAGE_DESC_RECORD_TYPE || DGifGetImageDesc(gif) != GIF_OK ||
            DGifGetCode(gif, &code, &block) != GIF_OK) {
            status = failed(type != IMAGE_DESC_RECORD_TYPE ? D_GIF_ERR_WRONG_RECORD : gif->Error, &s, message,
                            message_size);
            break;
        }
        while (status == CACHALOT_IMAGE_OK && block != NULL) {
            if (DGifGetCodeNext(gif, &block) != GIF_OK) {
                status = failed(gif->Error, &s, message, message_size);
            }
        }
        if (status == CACHALOT_IMAGE_OK) {
            (*count)++;
        }
    }
    if (status == CACHALOT_IMAGE_OK && *count == 0) {
        snprintf(message, message_size, "the GIF has no frames");
        status = CACHALOT_IMAGE_CORRUPT;
    }
    DGifCloseFile(gif, &error);
    return status;
}
