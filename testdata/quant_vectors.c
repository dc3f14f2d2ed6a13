// The harness of make_quant_vectors.sh: reads f32 rows (make_quant_rows.py's layout) on stdin,
// quantizes each with llama.cpp's reference quantizers (ggml-quants.c, linked beside it) and
// writes the expected bytes on stdout, for tests/quantize.rs. With the argument `hash` it
// writes instead one text line per type: its name, the blocks made and the FNV-1a-64 of their
// bytes (rows in input order), in hex.
//
// With `weighted WEIGHTS` (make_quant_weights.py's layout) it quantizes instead each job's row
// with its importance weights through llama-quantize's entry points (`quantize_q4_0` to
// `quantize_q6_K`, one row of n_per_row values given `quant_weights`), writing magic
// "SCQEXPW1", u32 type count, per type u32 ggml type id, u32 byte count and the bytes (jobs in
// order). With `hashw WEIGHTS` it writes the hash lines of those types over the rows, each a
// row of 256 quantized with the first weight vector of 256.
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
typedef size_t (*weighted_fn)(const float *, void *, int64_t, int64_t, const float *);

struct qtype {
    uint32_t id;
    const char * name;
    size_t block_values, block_bytes;
    quantize_fn f;
    weighted_fn weighted; // llama-quantize's entry point, NULL where it has none
};

#define Q(id, name, qk, block, fn, w) { id, name, qk, sizeof(block), (quantize_fn) fn, w }
static const struct qtype TYPES[] = {
    Q(2, "Q4_0", QK4_0, block_q4_0, quantize_row_q4_0_ref, quantize_q4_0),
    Q(3, "Q4_1", QK4_1, block_q4_1, quantize_row_q4_1_ref, quantize_q4_1),
    Q(6, "Q5_0", QK5_0, block_q5_0, quantize_row_q5_0_ref, quantize_q5_0),
    Q(7, "Q5_1", QK5_1, block_q5_1, quantize_row_q5_1_ref, quantize_q5_1),
    Q(8, "Q8_0", QK8_0, block_q8_0, quantize_row_q8_0_ref, quantize_q8_0),
    Q(10, "Q2_K", QK_K, block_q2_K, quantize_row_q2_K_ref, quantize_q2_K),
    Q(11, "Q3_K", QK_K, block_q3_K, quantize_row_q3_K_ref, quantize_q3_K),
    Q(12, "Q4_K", QK_K, block_q4_K, quantize_row_q4_K_ref, quantize_q4_K),
    Q(13, "Q5_K", QK_K, block_q5_K, quantize_row_q5_K_ref, quantize_q5_K),
    Q(14, "Q6_K", QK_K, block_q6_K, quantize_row_q6_K_ref, quantize_q6_K),
    Q(15, "Q8_K", QK_K, block_q8_K, quantize_row_q8_K_ref, NULL),
};
#define NTYPES (sizeof(TYPES) / sizeof(TYPES[0]))

// The row size the `quantize_q*` entry points step by.
size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    for (size_t t = 0; t < NTYPES; t++) {
        if (TYPES[t].id == (uint32_t) type) return ne / TYPES[t].block_values * TYPES[t].block_bytes;
    }
    abort();
}

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

// make_quant_weights.py's file: the vectors and the jobs (row index, vector index).
struct weights {
    uint32_t nvec, njobs;
    float ** vec;
    uint32_t * lens;
    uint32_t * jobs;
};

static uint32_t read_u32(FILE * f) {
    uint32_t v;
    if (fread(&v, 4, 1, f) != 1) die("weights file ends early");
    return v;
}

static struct weights read_weights(const char * path) {
    FILE * f = fopen(path, "rb");
    if (!f) die("cannot open the weights file");
    char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "SCQWGT01", 8)) die("not a weights file");
    struct weights w;
    w.nvec = read_u32(f);
    w.vec = calloc(w.nvec, sizeof(float *));
    w.lens = calloc(w.nvec, 4);
    for (uint32_t v = 0; v < w.nvec; v++) {
        w.lens[v] = read_u32(f);
        w.vec[v] = malloc((size_t) w.lens[v] * 4);
        if (fread(w.vec[v], 4, w.lens[v], f) != w.lens[v]) die("weights file ends early");
    }
    w.njobs = read_u32(f);
    w.jobs = malloc((size_t) w.njobs * 8);
    if (fread(w.jobs, 4, 2 * (size_t) w.njobs, f) != 2 * (size_t) w.njobs) die("weights file ends early");
    fclose(f);
    return w;
}

// The weighted outputs (`weighted`, or their hashes with `hashw`) of every type llama-quantize
// quantizes with weights.
static int weighted(const struct weights * w, int hash, float ** rows, const uint32_t * lens,
                    uint32_t nrows) {
    const float * first256 = NULL;
    for (uint32_t v = 0; v < w->nvec && !first256; v++) {
        if (w->lens[v] == 256) first256 = w->vec[v];
    }
    if (!first256) die("no weight vector of 256");
    uint32_t n = 0;
    for (size_t t = 0; t < NTYPES; t++) n += TYPES[t].weighted != NULL;
    if (!hash) {
        put("SCQEXPW1", 8);
        put_u32(n);
    }
    for (size_t t = 0; t < NTYPES; t++) {
        const struct qtype * q = &TYPES[t];
        if (!q->weighted) continue;
        size_t len = 0;
        uint32_t count = hash ? nrows : w->njobs;
        for (uint32_t j = 0; j < count; j++) {
            uint32_t r = hash ? j : w->jobs[2 * j];
            if (r >= nrows) die("a job's row is past the rows");
            len += ggml_row_size(q->id, lens[r]);
        }
        uint8_t * out = calloc(1, len), * at = out;
        if (!out) die("out of memory");
        for (uint32_t j = 0; j < count; j++) {
            uint32_t r = hash ? j : w->jobs[2 * j];
            const float * qw = first256;
            if (!hash) {
                uint32_t v = w->jobs[2 * j + 1];
                if (v >= w->nvec || w->lens[v] != lens[r]) die("a job's weights do not fit its row");
                qw = w->vec[v];
            } else if (lens[r] != 256) {
                die("a hashed row is not 256 long");
            }
            at += q->weighted(rows[r], at, 1, lens[r], qw);
        }
        if (hash) {
            printf("%s %zu %016llx\n", q->name, len / q->block_bytes, (unsigned long long) fnv(FNV_START, out, len));
        } else {
            put_u32(q->id);
            put_u32((uint32_t) len);
            put(out, len);
        }
        free(out);
    }
    return 0;
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

    if (argc > 2 && (!strcmp(argv[1], "weighted") || !strcmp(argv[1], "hashw"))) {
        struct weights w = read_weights(argv[2]);
        return weighted(&w, !strcmp(argv[1], "hashw"), rows, lens, nrows);
    }
    const size_t ntypes = NTYPES;
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
