/* libvips' side of Benchmarks/images-vs-libvips-pillow, which compiles it with
 * `cc vips-timer.c $(pkg-config --cflags --libs vips)` (Debian: libvips-dev).
 *
 *   vips-timer thumbnail FILE RUNS SIZE [OUT]
 *       Reads FILE into memory once, then times RUNS thumbnails of it at most SIZE pixels on
 *       their longest side: vips_thumbnail_buffer (which shrinks on load where the format
 *       allows: JPEG by 2, 4 or 8 in libjpeg, WebP in libwebp's scaled decode) and
 *       vips_image_write_to_memory, so that the pixels are really computed. Prints the median
 *       seconds of one thumbnail, as ThumbnailTimer does, then on a second line the most memory
 *       the process held (its peak resident set after exec, file included, in bytes); with OUT,
 *       writes the last thumbnail there (for example out.png) to check it.
 *   vips-timer encode FILE RUNS FORMAT OUT
 *       Loads FILE (a small picture) into memory once, then times RUNS encodings of it by
 *       vips_image_write_to_buffer with FORMAT, a suffix with options such as ".webp[Q=90]";
 *       prints the median seconds and writes the last encoding to OUT.
 *   vips-timer --version
 *
 * vips' operation cache is off (or every run after the first would be a cache hit), and so is
 * its thread pool unless VIPS_CONCURRENCY says otherwise (the script sets it to 1 by default:
 * Cachalot and Pillow make a thumbnail on one thread). vipsthumbnail's per-process start-up,
 * about the cost of loading libvips and its modules, is not part of what this times.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vips/vips.h>

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *times, int count) {
    qsort(times, count, sizeof *times, compare_doubles);
    return times[count / 2];
}

static int fail(const char *what) {
    fprintf(stderr, "vips-timer: %s: %s\n", what, vips_error_buffer());
    return 1;
}

/* The process's peak resident set since exec, in bytes (Linux's VmHWM); 0 if unknown. */
static long long peak_memory(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long long kilobytes = 0;
    while (status && fgets(line, sizeof line, status))
        if (sscanf(line, "VmHWM: %lld kB", &kilobytes) == 1)
            break;
    if (status)
        fclose(status);
    return kilobytes * 1024;
}

static int thumbnail(const char *file, int runs, int size, const char *out) {
    gchar *data;
    gsize length;
    GError *error = NULL;
    if (!g_file_get_contents(file, &data, &length, &error)) {
        fprintf(stderr, "vips-timer: %s\n", error->message);
        return 1;
    }
    double *times = g_new(double, runs);
    for (int run = 0; run < runs; run++) {
        VipsImage *image;
        gint64 start = g_get_monotonic_time();
        if (vips_thumbnail_buffer(data, length, &image, size, NULL))
            return fail(file);
        size_t bytes;
        void *pixels = vips_image_write_to_memory(image, &bytes);
        if (!pixels)
            return fail(file);
        times[run] = (g_get_monotonic_time() - start) / 1e6;
        int width = image->Xsize, height = image->Ysize;
        if ((width > height ? width : height) != size) {
            fprintf(stderr, "vips-timer: %s: a %d x %d thumbnail\n", file, width, height);
            return 1;
        }
        if (run == runs - 1 && out) {
            /* The thumbnail was a sequential pipeline, read once: write the pixels computed. */
            VipsImage *computed = vips_image_new_from_memory(pixels, bytes, width, height,
                                                             image->Bands, image->BandFmt);
            if (!computed || vips_image_write_to_file(computed, out, NULL))
                return fail(out);
            g_object_unref(computed);
        }
        g_free(pixels);
        g_object_unref(image);
    }
    printf("%.9f\n%lld\n", median(times, runs), peak_memory());
    g_free(times);
    g_free(data);
    return 0;
}

static int encode(const char *file, int runs, const char *format, const char *out) {
    VipsImage *image = vips_image_new_from_file(file, "access", VIPS_ACCESS_RANDOM, NULL);
    if (!image)
        return fail(file);
    /* In memory once, so that each run encodes and does not decode. */
    VipsImage *memory = vips_image_copy_memory(image);
    if (!memory)
        return fail(file);
    double *times = g_new(double, runs);
    void *buffer = NULL;
    size_t length = 0;
    for (int run = 0; run < runs; run++) {
        g_free(buffer);
        gint64 start = g_get_monotonic_time();
        if (vips_image_write_to_buffer(memory, format, &buffer, &length, NULL))
            return fail(format);
        times[run] = (g_get_monotonic_time() - start) / 1e6;
    }
    if (!g_file_set_contents(out, buffer, length, NULL)) {
        fprintf(stderr, "vips-timer: cannot write %s\n", out);
        return 1;
    }
    printf("%.9f\n", median(times, runs));
    g_free(buffer);
    g_free(times);
    g_object_unref(memory);
    g_object_unref(image);
    return 0;
}

int main(int argc, char **argv) {
    if (VIPS_INIT(argv[0]))
        vips_error_exit(NULL);
    vips_cache_set_max(0);
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("%s\n", vips_version_string());
        return 0;
    }
    int runs = argc >= 4 ? atoi(argv[3]) : 0;
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "thumbnail") == 0 && runs > 0)
        return thumbnail(argv[2], runs, atoi(argv[4]), argc == 6 ? argv[5] : NULL);
    if (argc == 6 && strcmp(argv[1], "encode") == 0 && runs > 0)
        return encode(argv[2], runs, argv[4], argv[5]);
    fprintf(stderr, "usage: vips-timer thumbnail FILE RUNS SIZE [OUT]\n"
                    "       vips-timer encode FILE RUNS FORMAT OUT\n"
                    "       vips-timer --version\n");
    return 64;
}
