#ifndef CACHALOT_MALLOC_CONTROL_H
#define CACHALOT_MALLOC_CONTROL_H

#include <stddef.h>

/// What the C library's malloc holds, from glibc's `mallinfo2()`; all zero, with `isAvailable`
/// 0, where the C library is not glibc.
typedef struct {
    /// 1 where these figures come from glibc, else 0.
    int isAvailable;
    /// Bytes the arenas took from the system, by `brk` and by mapping heaps (`arena`).
    size_t arenaBytes;
    /// Bytes of the chunks malloc mapped on their own, each large allocation (`hblkhd`).
    size_t mappedBytes;
    /// Bytes handed out from the arenas and not yet freed (`uordblks`).
    size_t inUseBytes;
    /// Bytes free inside the arenas: held by the process, not in use (`fordblks`).
    size_t freeBytes;
} cachalot_malloc_statistics;

/// Reads the statistics: it walks every arena's free lists under the arena's lock, which takes
/// longer the more free chunks there are (a millisecond or so for tens of thousands).
cachalot_malloc_statistics cachalot_malloc_read_statistics(void);

/// `mallopt(M_ARENA_MAX, count)`: at most `count` arenas from now on. Returns 1 if the C library
/// took it, 0 if it refused or is not glibc.
int cachalot_malloc_set_arena_limit(int count);

/// `mallopt(M_MMAP_THRESHOLD, bytes)`: allocations of at least `bytes` are mapped on their own
/// and unmapped when freed, and the threshold no longer rises by itself. Returns 1 if the C
/// library took it; 0 if it refused, if `bytes` does not fit in an `int`, or if it is not glibc.
int cachalot_malloc_set_mmap_threshold(size_t bytes);

/// `mallopt(M_TRIM_THRESHOLD, bytes)`: free memory at the top of a heap is given back to the
/// system once it exceeds `bytes`, not before. Returns 1 if the C library took it; 0 if it
/// refused, if `bytes` does not fit in an `int`, or if it is not glibc.
int cachalot_malloc_set_trim_threshold(size_t bytes);

/// `malloc_trim(0)`: gives the system back every whole free page in every arena. Returns 1 if
/// memory was given back, 0 if none was or the C library is not glibc.
int cachalot_malloc_trim(void);

#endif
