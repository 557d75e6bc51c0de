#include "BodyChecksum.h"

#include <string.h>

#if defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#endif

// MARK: - Portable CRC-32C, a byte at a time

static uint32_t table[256];

static void make_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        table[n] = crc;
    }
}

static uint32_t portable_bytes(uint32_t crc, const uint8_t *bytes, size_t count) {
    for (size_t i = 0; i < count; i++) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
    return crc;
}

static uint32_t portable_word(uint32_t crc, uint64_t word) {
    for (int k = 0; k < 8; k++) {
        crc = table[(crc ^ (uint32_t)word) & 0xFF] ^ (crc >> 8);
        word >>= 8;
    }
    return crc;
}

static uint64_t load_word(const uint8_t *bytes) {
    uint64_t word;
    memcpy(&word, bytes, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    word = __builtin_bswap64(word);
#endif
    return word;
}

static void portable_blocks(uint32_t lanes[3], const uint8_t *bytes, size_t blocks) {
    uint32_t a = lanes[0], b = lanes[1], c = lanes[2];
    for (size_t i = 0; i < blocks; i++, bytes += 24) {
        a = portable_word(a, load_word(bytes));
        b = portable_word(b, load_word(bytes + 8));
        c = portable_word(c, load_word(bytes + 16));
    }
    lanes[0] = a, lanes[1] = b, lanes[2] = c;
}

// MARK: - The processor's instruction

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static void accelerated_blocks(uint32_t lanes[3], const uint8_t *bytes, size_t blocks) {
    uint64_t a = lanes[0], b = lanes[1], c = lanes[2];
    for (size_t i = 0; i < blocks; i++, bytes += 24) {
        a = __builtin_ia32_crc32di(a, load_word(bytes));
        b = __builtin_ia32_crc32di(b, load_word(bytes + 8));
        c = __builtin_ia32_crc32di(c, load_word(bytes + 16));
    }
    lanes[0] = (uint32_t)a, lanes[1] = (uint32_t)b, lanes[2] = (uint32_t)c;
}

__attribute__((target("sse4.2"))) static uint32_t accelerated_bytes(uint32_t crc, const uint8_t *bytes, size_t count) {
    uint64_t wide = crc;
    for (; count >= 8; count -= 8, bytes += 8) wide = __builtin_ia32_crc32di(wide, load_word(bytes));
    crc = (uint32_t)wide;
    for (; count > 0; count--, bytes++) crc = __builtin_ia32_crc32qi(crc, *bytes);
    return crc;
}
#define HAS_ACCELERATED 1
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
static void accelerated_blocks(uint32_t lanes[3], const uint8_t *bytes, size_t blocks) {
    uint32_t a = lanes[0], b = lanes[1], c = lanes[2];
    for (size_t i = 0; i < blocks; i++, bytes += 24) {
        a = __crc32cd(a, load_word(bytes));
        b = __crc32cd(b, load_word(bytes + 8));
        c = __crc32cd(c, load_word(bytes + 16));
    }
    lanes[0] = a, lanes[1] = b, lanes[2] = c;
}

static uint32_t accelerated_bytes(uint32_t crc, const uint8_t *bytes, size_t count) {
    for (; count >= 8; count -= 8, bytes += 8) crc = __crc32cd(crc, load_word(bytes));
    for (; count > 0; count--, bytes++) crc = __crc32cb(crc, *bytes);
    return crc;
}
#define HAS_ACCELERATED 1
#else
#define HAS_ACCELERATED 0
#endif

// MARK: - Choosing once

typedef void (*blocks_function)(uint32_t lanes[3], const uint8_t *bytes, size_t blocks);
typedef uint32_t (*bytes_function)(uint32_t crc, const uint8_t *bytes, size_t count);

static blocks_function chosen_blocks;
static bytes_function chosen_bytes;

// Runs when the library loads, before any thread can ask: the table and the choice are then
// only read.
__attribute__((constructor)) static void choose(void) {
    make_table();
    chosen_blocks = portable_blocks;
    chosen_bytes = portable_bytes;
#if HAS_ACCELERATED
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("sse4.2")) return;
#endif
    chosen_blocks = accelerated_blocks;
    chosen_bytes = accelerated_bytes;
#endif
}

int cachalot_crc32c_is_accelerated(void) { return chosen_blocks != portable_blocks; }

uint32_t cachalot_crc32c_portable(uint32_t crc, const void *bytes, size_t count) {
    return ~portable_bytes(~crc, bytes, count);
}

uint32_t cachalot_crc32c(uint32_t crc, const void *bytes, size_t count) {
    return ~chosen_bytes(~crc, bytes, count);
}

// MARK: - The body checksum

void cachalot_body_checksum_init(cachalot_body_checksum_state *state) {
    memset(state, 0, sizeof *state);
    state->lanes[0] = state->lanes[1] = state->lanes[2] = 0xFFFFFFFFu;
}

void cachalot_body_checksum_update(cachalot_body_checksum_state *state, const void *bytes, size_t count) {
    const uint8_t *next = bytes;
    state->length += count;
    if (state->pendingCount > 0) {
        size_t taken = 24 - state->pendingCount;
        if (taken > count) taken = count;
        memcpy(state->pending + state->pendingCount, next, taken);
        state->pendingCount += (uint32_t)taken;
        next += taken;
        count -= taken;
        if (state->pendingCount < 24) return;
        chosen_blocks(state->lanes, state->pending, 1);
        state->pendingCount = 0;
    }
    size_t blocks = count / 24;
    if (blocks > 0) chosen_blocks(state->lanes, next, blocks);
    next += blocks * 24;
    count -= blocks * 24;
    memcpy(state->pending, next, count);
    state->pendingCount = (uint32_t)count;
}

uint32_t cachalot_body_checksum_final(const cachalot_body_checksum_state *state) {
    uint32_t first = chosen_bytes(state->lanes[0], state->pending, state->pendingCount);
    uint8_t tail[16];
    uint32_t second = state->lanes[1], third = state->lanes[2];
    uint64_t length = state->length;
    for (int i = 0; i < 4; i++) tail[i] = (uint8_t)(second >> (8 * i));
    for (int i = 0; i < 4; i++) tail[4 + i] = (uint8_t)(third >> (8 * i));
    for (int i = 0; i < 8; i++) tail[8 + i] = (uint8_t)(length >> (8 * i));
    return ~chosen_bytes(first, tail, sizeof tail);
}

uint32_t cachalot_body_checksum(const void *bytes, size_t count) {
    cachalot_body_checksum_state state;
    cachalot_body_checksum_init(&state);
    cachalot_body_checksum_update(&state, bytes, count);
    return cachalot_body_checksum_final(&state);
}
