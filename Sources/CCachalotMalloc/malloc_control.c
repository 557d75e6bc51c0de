#include "MallocControl.h"

// Any C library header defines __GLIBC__ on glibc (through <features.h>); <stddef.h>, which
// comes with the compiler, does not.
#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

cachalot_malloc_statistics cachalot_malloc_read_statistics(void) {
    cachalot_malloc_statistics statistics = {0};
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    statistics.isAvailable = 1;
    statistics.arenaBytes = info.arena;
    statistics.mappedBytes = info.hblkhd;
    statistics.inUseBytes = info.uordblks;
    statistics.freeBytes = info.fordblks;
#endif
    return statistics;
}

int cachalot_malloc_set_arena_limit(int count) {
#if defined(__GLIBC__)
    return mallopt(M_ARENA_MAX, count);
#else
    (void)count;
    return 0;
#endif
}

int cachalot_malloc_set_mmap_threshold(size_t bytes) {
#if defined(__GLIBC__)
    return bytes > (size_t)0x7fffffff ? 0 : mallopt(M_MMAP_THRESHOLD, (int)bytes);
#else
    (void)bytes;
    return 0;
#endif
}

int cachalot_malloc_set_trim_threshold(size_t bytes) {
#if defined(__GLIBC__)
    return bytes > (size_t)0x7fffffff ? 0 : mallopt(M_TRIM_THRESHOLD, (int)bytes);
#else
    (void)bytes;
    return 0;
#endif
}

int cachalot_malloc_trim(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}
