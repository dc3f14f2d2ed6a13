// The harness of make_quant_vectors.sh: reads f32 rows (make_quant_rows.py's layout) on stdin,
// quantizes each with llama.cpp's reference quantizers (ggml-quants.c, linked beside it) and
// writes the expected bytes on stdout, for tests/quantize.rs. With the argument `hash` it
// writes instead one text line per type: its name, the blocks made and the FNV-1a-64 of their
// bytes (rows in input order), in hex.
//
// Output layout (little-endian): magic "SCQEXP01"; u32 type count; per type: u32 ggml type id,
// u32 byte count, the bytes (each row's blocks, rows in input order; every row length is a
// multiple of 256); then u32 conversion count; per conversion: u32 code, u64 values converted,
// u64 FNV-1a-64 of the converted values' bytes. Conversion codes: 0 F16->F32 over all 65536
// halves, 1 BF16->F32 over all 65536, 2 F32->F16 and 3 F32->BF16 over sweep() (the row values,
// then 2^20 spread bit patterns each followed by its F16 and BF16 round-to-even ties).

#include "ggml-common.h"
#include "ggml-impl.h"
#include "ggml-quants.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// What ggml-quants.c calls but the reference quantizers never reach.
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml_abort at %s:%d (%s)\n", file, line, fmt);
    abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; abort(); }
size_t ggml_type_size(enum ggml_type type) { (void) type; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; abort(); }

static void die(const char * what) {
    fprintf(stderr, "quant_vectors: %s\n", what);
    exit(1);
}

static void put(const void * p, size_t n) {
    if (fwrite(p, 1, n, stdout) != n) die("write failed");
}

static void put_u32(uint32_t v) { put(&v, 4); }
static void put_u64(uint64_t v) { put(&v, 8); }

static void get(void * p, size_t n) {
    if (fread(p, 1, n, stdin) != n) die("input ends early");
}

typedef void (*quantize_fn)(const float *, void *, int64_t);

struct qtype {
    uint32_t id;
    const char * name;
    size_t block_values, block_bytes;
    quantize_fn f;
};

#define Q(id, name, qk, block, fn) { id, name, qk, sizeof(block), (quantize_fn) fn }
static const struct qtype TYPES[] = {
    Q(2, "Q4_0", QK4_0, block_q4_0, quantize_row_q4_0_ref),
    Q(3, "Q4_1", QK4_1, block_q4_1, quantize_row_q4_1_ref),
    Q(6, "Q5_0", QK5_0, block_q5_0, quantize_row_q5_0_ref),
    Q(7, "Q5_1", QK5_1, block_q5_1, quantize_row_q5_1_ref),
    Q(8, "Q8_0", QK8_0, block_q8_0, quantize_row_q8_0_ref),
    Q(10, "Q2_K", QK_K, block_q2_K, quantize_row_q2_K_ref),
    Q(11, "Q3_K", QK_K, block_q3_K, quantize_row_q3_K_ref),
    Q(12, "Q4_K", QK_K, block_q4_K, quantize_row_q4_K_ref),
    Q(13, "Q5_K", QK_K, block_q5_K, quantize_row_q5_K_ref),
    Q(14, "Q6_K", QK_K, block_q6_K, quantize_row_q6_K_ref),
    Q(15, "Q8_K", QK_K, block_q8_K, quantize_row_q8_K_ref),
};

static uint64_t fnv(uint64_t h, const void * p, size_t n) {
    const uint8_t * b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV_START 0xcbf29ce484222325ull
#define SPREAD (1u << 20)

// The f32 bit patterns the F32->F16 and F32->BF16 conversions are checked on.
static uint32_t * sweep(const float * values, size_t n, size_t * count) {
    uint32_t * out = malloc((n + 3 * (size_t) SPREAD) * 4);
    if (!out) die("out of memory");
    memcpy(out, values, n * 4);
    size_t at = n;
    for (uint32_t i = 0; i < SPREAD; i++) {
        uint32_t p = i * 0x9E3779B9u;
        out[at++] = p;
        out[at++] = (p & ~0x1FFFu) | 0x1000u;
        out[at++] = (p & ~0xFFFFu) | 0x8000u;
    }
    *count = at;
    return out;
}

static void put_conversion(uint32_t code, uint64_t count, uint64_t hash) {
    put_u32(code);
    put_u64(count);
    put_u64(hash);
}

// Quantizes the rows to `q` into `out` (sized for them), one after another.
static void quantize(const struct qtype * q, float ** rows, const uint32_t * lens, uint32_t nrows,
                     uint8_t * out) {
    for (uint32_t r = 0; r < nrows; r++) {
        q->f(rows[r], out, lens[r]);
        out += lens[r] / q->block_values * q->block_bytes;
    }
}

int main(int argc, char ** argv) {
    char magic[8];
    get(magic, 8);
    if (memcmp(magic, "SCQROWS1", 8)) die("not a rows file");
    uint32_t nrows;
    get(&nrows, 4);
    float ** rows = calloc(nrows, sizeof(float *));
    uint32_t * lens = calloc(nrows, 4);
    size_t total = 0;
    for (uint32_t r = 0; r < nrows; r++) {
        get(&lens[r], 4);
        if (lens[r] % QK_K) die("a row length is not a multiple of 256");
        rows[r] = malloc((size_t) lens[r] * 4);
        get(rows[r], (size_t) lens[r] * 4);
        total += lens[r];
    }

    const size_t ntypes = sizeof(TYPES) / sizeof(TYPES[0]);
    const int hash = argc > 1 && !strcmp(argv[1], "hash");
    if (!hash) {
        put("SCQEXP01", 8);
        put_u32((uint32_t) ntypes);
    }
    for (size_t t = 0; t < ntypes; t++) {
        const struct qtype * q = &TYPES[t];
        size_t blocks = total / q->block_values, len = blocks * q->block_bytes;
        uint8_t * out = calloc(1, len);
        if (!out) die("out of memory");
        quantize(q, rows, lens, nrows, out);
        if (hash) {
            printf("%s %zu %016llx\n", q->name, blocks, (unsigned long long) fnv(FNV_START, out, len));
        } else {
            put_u32(q->id);
            put_u32((uint32_t) len);
            put(out, len);
        }
        free(out);
    }
    if (hash) return 0;

    put_u32(4);
    uint64_t h = FNV_START;
    for (uint32_t i = 0; i < 65536; i++) {
        float f = GGML_FP16_TO_FP32((ggml_fp16_t) i);
        h = fnv(h, &f, 4);
    }
    put_conversion(0, 65536, h);
    h = FNV_START;
    for (uint32_t i = 0; i < 65536; i++) {
        ggml_bf16_t b = { (uint16_t) i };
        float f = GGML_BF16_TO_FP32(b);
        h = fnv(h, &f, 4);
    }
    put_conversion(1, 65536, h);

    float * values = malloc(total * 4);
    size_t at = 0;
    for (uint32_t r = 0; r < nrows; r++) {
        memcpy(values + at, rows[r], (size_t) lens[r] * 4);
        at += lens[r];
    }
    size_t count;
    uint32_t * patterns = sweep(values, total, &count);
    uint64_t h16 = FNV_START, hbf = FNV_START;
    for (size_t i = 0; i < count; i++) {
        float f;
        memcpy(&f, &patterns[i], 4);
        ggml_fp16_t a = GGML_FP32_TO_FP16(f);
        ggml_bf16_t b = GGML_FP32_TO_BF16(f);
        h16 = fnv(h16, &a, 2);
        hbf = fnv(hbf, &b.bits, 2);
    }
    put_conversion(2, count, h16);
    put_conversion(3, count, hbf);
    return 0;
}
