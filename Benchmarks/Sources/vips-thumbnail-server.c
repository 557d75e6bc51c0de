/* The libvips baseline of Benchmarks/image-endpoint-vs-libvips, which compiles it with
 * `cc -O2 vips-thumbnail-server.c $(pkg-config --cflags --libs vips) -lpthread`
 * (Debian: libvips-dev).
 *
 *   vips-thumbnail-server PORT WORKERS thumbnail|shrink FILE...
 *
 * A minimal HTTP/1.1 server on 127.0.0.1:PORT that does, for every request, what an image
 * server such as imgproxy does for an uncached variant, minus fetching the original: the
 * originals are read into memory once at start, then each request gets a thumbnail of one made
 * and encoded by vips_jpegsave_buffer (quality 90, 4:2:0, as Cachalot's default JPEG) or
 * vips_webpsave_buffer (quality 80, as Cachalot's default WebP). The thumbnail is made:
 *
 * - `thumbnail`: by vips_thumbnail_buffer, libvips' own way. It shrinks a JPEG on load by 8, 4
 *   or 2 but leaves at least a factor 2 to its lanczos3 reduce: a 4000-pixel JPEG to 256 is
 *   decoded at 1/4 (1000 pixels), not 1/8. A WebP is decoded by libwebp straight at the size.
 * - `shrink`: as imgproxy does (its scaleOnLoad): a JPEG loaded with the largest shrink of 8, 4
 *   and 2 that the scale allows (1/8 here, 500 pixels, as Cachalot's decoder does), a WebP
 *   (any other source) with libwebp's scale, then vips_resize (lanczos3) to the exact size.
 *
 * It reads the path as Cachalot's image endpoint does, as far as the benchmark needs:
 *
 *   GET /<anything>/w<N>,h<N>,jpeg|webp/<name>
 *
 * `<name>` is the base name of one of the FILEs; `w` and `h` bound the thumbnail (fit), 256
 * by default each; the format is JPEG unless `webp` is named. Nothing is cached: libvips'
 * operation cache is off, so every request decodes, resizes and encodes.
 *
 * One thread per connection reads requests (keep-alive) and writes answers; at most WORKERS
 * thumbnails are made at once (a counting semaphore: one per core, as Cachalot's pipeline
 * allows one decode per active processor), each on one thread (vips_concurrency_set(1)) but
 * for a WebP source: libvips' WebP loader turns on libwebp's `use_threads`, which filters on a
 * second thread (Cachalot's decoder does not), so that one WebP thumbnail alone uses more than
 * one core.
 * A request that is not a GET of a known file is answered 404; `Connection: close` is obeyed.
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vips/vips.h>

#define MAX_FILES 8
#define HEADER_LIMIT 16384

static struct {
    const char *name; /* base name */
    gchar *data;
    gsize length;
} files[MAX_FILES];
static int file_count;
static sem_t workers;
static int imgproxy_shrink; /* mode `shrink` */

/* The thumbnail of data fitting width x height, never larger than the original. */
static int make_thumbnail(const gchar *data, gsize length, int width, int height, VipsImage **out) {
    if (!imgproxy_shrink)
        return vips_thumbnail_buffer((void *)data, length, out, width, "height", height, "size", VIPS_SIZE_DOWN,
                                     NULL);
    int jpeg = length > 2 && (unsigned char)data[0] == 0xFF && (unsigned char)data[1] == 0xD8;
    VipsImage *header = vips_image_new_from_buffer(data, length, "", NULL);
    if (!header)
        return -1;
    double original_width = header->Xsize, original_height = header->Ysize;
    g_object_unref(header);
    double scale = MIN(1.0, MIN(width / original_width, height / original_height));
    int target_width = MAX(1, (int)(original_width * scale + 0.5));
    int target_height = MAX(1, (int)(original_height * scale + 0.5));
    int shrink = (int)(1.0 / scale);
    shrink = shrink >= 8 ? 8 : shrink >= 4 ? 4 : shrink >= 2 ? 2 : 1;
    VipsImage *loaded;
    int failed = jpeg ? vips_jpegload_buffer((void *)data, length, &loaded, "shrink", shrink, NULL)
                      : vips_webpload_buffer((void *)data, length, &loaded, "scale", scale, NULL);
    if (failed)
        return -1;
    if (loaded->Xsize == target_width && loaded->Ysize == target_height) {
        *out = loaded;
        return 0;
    }
    failed = vips_resize(loaded, out, (double)target_width / loaded->Xsize, "vscale",
                         (double)target_height / loaded->Ysize, NULL);
    g_object_unref(loaded);
    return failed;
}

static int write_all(int fd, const void *bytes, size_t length) {
    const char *p = bytes;
    while (length > 0) {
        ssize_t n = write(fd, p, length);
        if (n <= 0)
            return -1;
        p += n;
        length -= (size_t)n;
    }
    return 0;
}

static int answer(int fd, int status, const char *type, const void *body, size_t length, int keep_alive) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status,
                     status == 200 ? "OK" : status == 404 ? "Not Found" : "Internal Server Error", type, length,
                     keep_alive ? "" : "Connection: close\r\n");
    if (write_all(fd, head, (size_t)n))
        return -1;
    return length > 0 ? write_all(fd, body, length) : 0;
}

/* Reads `w<N>`, `h<N>` and `webp` from the options segment: the path's second-to-last one. */
static int parse(const char *path, size_t path_length, int *file, int *width, int *height, int *webp) {
    *width = 256, *height = 256, *webp = 0, *file = -1;
    const char *end = path + path_length;
    const char *last = end;
    while (last > path && last[-1] != '/')
        last--;
    const char *name_end = memchr(last, '?', (size_t)(end - last));
    if (!name_end)
        name_end = end;
    for (int i = 0; i < file_count; i++)
        if (strlen(files[i].name) == (size_t)(name_end - last) && !memcmp(files[i].name, last, (size_t)(name_end - last)))
            *file = i;
    if (*file < 0 || last == path)
        return -1;
    const char *options = last - 1;
    while (options > path && options[-1] != '/')
        options--;
    for (const char *token = options; token < last - 1;) {
        const char *token_end = token;
        while (token_end < last - 1 && *token_end != ',')
            token_end++;
        size_t length = (size_t)(token_end - token);
        if (length == 4 && !memcmp(token, "webp", 4)) {
            *webp = 1;
        } else if (length > 1 && (*token == 'w' || *token == 'h')) {
            int value = atoi(token + 1);
            if (value < 1 || value > 16384)
                return -1;
            *(*token == 'w' ? width : height) = value;
        }
        token = token_end + 1;
    }
    return 0;
}

static void *serve(void *argument) {
    int fd = (int)(intptr_t)argument;
    char *buffer = malloc(HEADER_LIMIT);
    size_t filled = 0;
    for (;;) {
        char *header_end;
        while (!(header_end = memmem(buffer, filled, "\r\n\r\n", 4))) {
            if (filled == HEADER_LIMIT)
                goto done;
            ssize_t n = read(fd, buffer + filled, HEADER_LIMIT - filled);
            if (n <= 0)
                goto done;
            filled += (size_t)n;
        }
        size_t request_length = (size_t)(header_end + 4 - buffer);
        /* Request line: METHOD SP PATH SP VERSION */
        char *line_end = memmem(buffer, request_length, "\r\n", 2);
        char *space = memchr(buffer, ' ', (size_t)(line_end - buffer));
        char *path = space ? space + 1 : NULL;
        char *path_end = path ? memchr(path, ' ', (size_t)(line_end - path)) : NULL;
        int keep_alive = 1;
        for (char *p = line_end; p < header_end;) {
            char *field = p + 2;
            p = memmem(field, (size_t)(header_end + 2 - field), "\r\n", 2);
            if (!strncasecmp(field, "connection:", 11)) {
                for (char *c = field + 11; c + 5 <= p; c++)
                    if (!strncasecmp(c, "close", 5))
                        keep_alive = 0;
            }
        }
        int file, width, height, webp, status = 0;
        if (!space || !path_end || strncmp(buffer, "GET ", 4) ||
            parse(path, (size_t)(path_end - path), &file, &width, &height, &webp)) {
            status = answer(fd, 404, "text/plain", "not found\n", 10, keep_alive);
        } else {
            VipsImage *thumbnail = NULL;
            void *out = NULL;
            size_t out_length = 0;
            sem_wait(&workers);
            int failed = make_thumbnail(files[file].data, files[file].length, width, height, &thumbnail);
            if (!failed)
                failed = webp ? vips_webpsave_buffer(thumbnail, &out, &out_length, "Q", 80, NULL)
                              : vips_jpegsave_buffer(thumbnail, &out, &out_length, "Q", 90, "subsample_mode",
                                                     VIPS_FOREIGN_SUBSAMPLE_ON, NULL);
            sem_post(&workers);
            if (thumbnail)
                g_object_unref(thumbnail);
            if (failed) {
                fprintf(stderr, "vips-thumbnail-server: %s\n", vips_error_buffer());
                vips_error_clear();
                status = answer(fd, 500, "text/plain", "error\n", 6, keep_alive);
            } else {
                status = answer(fd, 200, webp ? "image/webp" : "image/jpeg", out, out_length, keep_alive);
            }
            g_free(out);
        }
        if (status || !keep_alive)
            goto done;
        memmove(buffer, buffer + request_length, filled - request_length);
        filled -= request_length;
    }
done:
    free(buffer);
    close(fd);
    vips_thread_shutdown();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[3], "thumbnail") && strcmp(argv[3], "shrink"))) {
        fprintf(stderr, "usage: vips-thumbnail-server PORT WORKERS thumbnail|shrink FILE...\n");
        return 2;
    }
    imgproxy_shrink = !strcmp(argv[3], "shrink");
    if (VIPS_INIT(argv[0]))
        vips_error_exit(NULL);
    vips_cache_set_max(0);
    vips_concurrency_set(1);
    signal(SIGPIPE, SIG_IGN);
    sem_init(&workers, 0, (unsigned)atoi(argv[2]));
    for (int i = 4; i < argc && file_count < MAX_FILES; i++, file_count++) {
        GError *error = NULL;
        if (!g_file_get_contents(argv[i], &files[file_count].data, &files[file_count].length, &error)) {
            fprintf(stderr, "vips-thumbnail-server: %s\n", error->message);
            return 1;
        }
        const char *slash = strrchr(argv[i], '/');
        files[file_count].name = slash ? slash + 1 : argv[i];
    }
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    int yes = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 128)) {
        perror("vips-thumbnail-server: bind");
        return 1;
    }
    for (;;) {
        int fd = accept(listener, NULL, NULL);
        if (fd < 0)
            continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thread, &attributes, serve, (void *)(intptr_t)fd))
            close(fd);
        pthread_attr_destroy(&attributes);
    }
}
