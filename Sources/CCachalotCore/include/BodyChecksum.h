#ifndef CACHALOT_BODY_CHECKSUM_H
#define CACHALOT_BODY_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// The checksum of an entry's body: CRC-32C (Castagnoli) over three lanes that take the body's
/// 8-byte words in turn (word i goes to lane i mod 3), so that a processor with a CRC-32C
/// instruction runs three independent chains at once; the bytes after the last whole block of
/// 24 go to the first lane, and the three lanes and the length are then folded into one value.
///
/// Every lane is a CRC-32C of its words, so a flipped bit, a torn write or a burst of damage is
/// found as surely as CRC-32C finds it. The value is the same on every processor: the hardware
/// instruction (SSE 4.2 on x86-64, chosen at run time; the CRC extension on 64-bit ARM where
/// the compiler targets it) and the portable table give the same result.
typedef struct {
    uint32_t lanes[3];
    uint32_t pendingCount;
    uint64_t length;
    uint8_t pending[24];
} cachalot_body_checksum_state;

void cachalot_body_checksum_init(cachalot_body_checksum_state *state);
void cachalot_body_checksum_update(cachalot_body_checksum_state *state, const void *bytes, size_t count);
uint32_t cachalot_body_checksum_final(const cachalot_body_checksum_state *state);

/// The checksum of `count` bytes at once: the same as init, one update and final.
uint32_t cachalot_body_checksum(const void *bytes, size_t count);

/// Plain CRC-32C of `count` bytes, continuing from `crc` (0 to start), by the portable table
/// alone and by the fastest path this processor has: for tests, which compare the two.
uint32_t cachalot_crc32c_portable(uint32_t crc, const void *bytes, size_t count);
uint32_t cachalot_crc32c(uint32_t crc, const void *bytes, size_t count);

/// Whether this process computes CRC-32C with a processor instruction.
int cachalot_crc32c_is_accelerated(void);

#endif
