#ifndef CACHALOT_SAFE_OPEN_H
#define CACHALOT_SAFE_OPEN_H

/// Opens `path`, relative to the open directory `directory`, with `flags`, following no symbolic
/// link in any of its components (not only the last, as `O_NOFOLLOW` does) and never leaving
/// `directory`: a link anywhere on the way fails with ELOOP (or EXDEV for `..`).
///
/// Linux: `openat2` with RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH, one call like `openat`; where the
/// kernel or a seccomp filter refuses `openat2` (before Linux 5.6), each directory on the way is
/// opened with O_NOFOLLOW | O_DIRECTORY from its parent instead. Apple platforms: `openat` with
/// O_NOFOLLOW_ANY. Returns the descriptor, or -1 with errno set.
int cachalot_open_beneath(int directory, const char *path, int flags, unsigned mode);

/// The same by the walk alone, one directory at a time: what `cachalot_open_beneath` falls back
/// to without `openat2`. For tests, which check both ways.
int cachalot_open_beneath_walking(int directory, const char *path, int flags, unsigned mode);

#endif
