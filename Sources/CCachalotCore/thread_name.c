#if defined(__linux__)
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <string.h>

#include "ThreadName.h"

void cachalot_name_this_thread(const char *name) {
#if defined(__linux__)
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = 0;
    pthread_setname_np(pthread_self(), truncated);
#elif defined(__APPLE__)
    pthread_setname_np(name);
#endif
}
