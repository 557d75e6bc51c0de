#ifndef CACHALOT_THREAD_NAME_H
#define CACHALOT_THREAD_NAME_H

/// Names the calling thread, as `top -H`, `ps -L` and debuggers show it: at most 15 bytes are
/// kept on Linux. Does nothing where the platform has no such call.
void cachalot_name_this_thread(const char *name);

#endif
