#include "SafeOpen.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/syscall.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define CACHALOT_RESOLVE_NO_SYMLINKS 0x04
#define CACHALOT_RESOLVE_BENEATH 0x08

struct cachalot_open_how {
    unsigned long long flags;
    unsigned long long mode;
    unsigned long long resolve;
};

/// 1 until openat2 was refused once: then every later call takes the walk.
static volatile int openat2_works = 1;
#endif

/// Opens each directory of `path` from its parent with O_NOFOLLOW | O_DIRECTORY, then the last
/// name with O_NOFOLLOW.
int cachalot_open_beneath_walking(int directory, const char *path, int flags, unsigned mode) {
    if (path[0] == '/') {
        errno = EXDEV;
        return -1;
    }
    int current = directory;
    const char *name = path;
    for (;;) {
        const char *slash = strchr(name, '/');
        if (slash == NULL) break;
        size_t length = (size_t)(slash - name);
        char part[256];
        if (length == 0 || length >= sizeof part) {
            if (current != directory) close(current);
            errno = length == 0 ? EINVAL : ENAMETOOLONG;
            return -1;
        }
        memcpy(part, name, length);
        part[length] = 0;
        if (strcmp(part, "..") == 0) {
            if (current != directory) close(current);
            errno = EXDEV;
            return -1;
        }
        int next = openat(current, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        if (current != directory) close(current);
        if (next < 0) {
            errno = saved;
            return -1;
        }
        current = next;
        name = slash + 1;
    }
    if (strcmp(name, "..") == 0) {
        if (current != directory) close(current);
        errno = EXDEV;
        return -1;
    }
    int result = openat(current, name, flags | O_NOFOLLOW, mode);
    int saved = errno;
    if (current != directory) close(current);
    errno = saved;
    return result;
}

int cachalot_open_beneath(int directory, const char *path, int flags, unsigned mode) {
#if defined(__linux__)
    if (openat2_works) {
        struct cachalot_open_how how = {
            .flags = (unsigned long long)(flags | O_NOFOLLOW),
            .mode = (flags & O_CREAT) ? mode : 0,
            .resolve = CACHALOT_RESOLVE_NO_SYMLINKS | CACHALOT_RESOLVE_BENEATH,
        };
        long result = syscall(SYS_openat2, directory, path, &how, sizeof how);
        if (result >= 0 || (errno != ENOSYS && errno != EPERM)) return (int)result;
        // EPERM is also a seccomp filter's answer: fall back once, for good.
        if (errno == ENOSYS) openat2_works = 0;
        int fallback = cachalot_open_beneath_walking(directory, path, flags, mode);
        if (fallback >= 0) openat2_works = 0;
        return fallback;
    }
    return cachalot_open_beneath_walking(directory, path, flags, mode);
#elif defined(__APPLE__) && defined(O_NOFOLLOW_ANY)
    return openat(directory, path, flags | O_NOFOLLOW_ANY, mode);
#else
    return cachalot_open_beneath_walking(directory, path, flags, mode);
#endif
}
