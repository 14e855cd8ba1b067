/*
 * util.c — arena allocator, diagnostics, dtype conversions and the seeded
 * pseudo-random fill that --verify, --run and the test data share.
 *
 * The seeded fill is part of the project's contract (docs/ir.md): Python
 * scripts that generate expected outputs reproduce it bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mcir.h"

void mcir_abort(const char *file, int line, const char *expr) {
    fprintf(stderr, "%s:%d: internal error: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}

/* ----------------------------------------------------------------- arena */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char mem[];
} arena_chunk;

struct mcir_arena {
    arena_chunk *head;
};

mcir_arena *mcir_arena_new(void) {
    mcir_arena *a = calloc(1, sizeof *a);
    MCIR_ASSERT(a);
    return a;
}

void mcir_arena_free(mcir_arena *a) {
    if (!a) return;
    for (arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

void *mcir_arena_alloc(mcir_arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    arena_chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t chunk = 64 * 1024;
        if (size > chunk / 4) {
            /* Large blocks get a chunk of their own, kept behind the head so
             * the head keeps serving small allocations. */
            arena_chunk *big = malloc(sizeof *big + size);
            MCIR_ASSERT(big);
            big->size = size;
            big->used = size;
            if (c) {
                big->next = c->next;
                c->next = big;
            } else {
                big->next = NULL;
                a->head = big;
            }
            memset(big->mem, 0, size);
            return big->mem;
        }
        c = malloc(sizeof *c + chunk);
        MCIR_ASSERT(c);
        c->size = chunk;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

void *mcir_arena_memdup(mcir_arena *a, const void *p, size_t size) {
    void *q = mcir_arena_alloc(a, size);
    if (size) memcpy(q, p, size);
    return q;
}

char *mcir_arena_strdup(mcir_arena *a, const char *s) {
    if (!s) return NULL;
    return mcir_arena_memdup(a, s, strlen(s) + 1);
}

char *mcir_arena_printf(mcir_arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    MCIR_ASSERT(n >= 0);
    char *s = mcir_arena_alloc(a, (size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

void *mcir_arena_grow(mcir_arena *a, void *p, int *cap, int n, size_t elem) {
    if (n <= *cap) return p;
    int newcap = *cap ? *cap : 8;
    while (newcap < n) newcap *= 2;
    void *q = mcir_arena_alloc(a, (size_t)newcap * elem);
    if (p && *cap) memcpy(q, p, (size_t)*cap * elem);
    *cap = newcap;
    return q;
}

bool mcir_mul_overflows(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

/* ----------------------------------------------------------- diagnostics */

mcir_diag mcir_diag_stderr(void) { return (mcir_diag){.out = stderr}; }
mcir_diag mcir_diag_to(FILE *out) { return (mcir_diag){.out = out}; }

void mcir_verror(mcir_diag *d, mcir_loc loc, const char *kind, const char *fmt,
                 va_list ap) {
    FILE *out = d && d->out ? d->out : stderr;
    const char *path = loc.path ? loc.path : "<input>";
    if (loc.line > 0)
        fprintf(out, "%s:%d:%d: %s: ", path, loc.line, loc.col > 0 ? loc.col : 1, kind);
    else
        fprintf(out, "%s: %s: ", path, kind);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    fflush(out);
}

void mcir_error(mcir_diag *d, mcir_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcir_verror(d, loc, "error", fmt, ap);
    va_end(ap);
    if (d) d->n_errors++;
}

void mcir_warning(mcir_diag *d, mcir_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcir_verror(d, loc, "warning", fmt, ap);
    va_end(ap);
    if (d) d->n_warnings++;
}

/* ---------------------------------------------------------------- dtypes */

static const struct {
    const char *name;
    size_t size;
} dtype_info[] = {
#define X(id, name, size) {name, size},
    MCIR_DTYPES(X)
#undef X
};

const char *mcir_dtype_name(mcir_dtype t) {
    MCIR_ASSERT(t >= 0 && t < MCIR_DTYPE_COUNT);
    return dtype_info[t].name;
}

size_t mcir_dtype_size(mcir_dtype t) {
    MCIR_ASSERT(t >= 0 && t < MCIR_DTYPE_COUNT);
    return dtype_info[t].size;
}

bool mcir_dtype_parse(const char *s, mcir_dtype *out) {
    for (int i = 0; i < MCIR_DTYPE_COUNT; i++)
        if (strcmp(dtype_info[i].name, s) == 0) {
            *out = (mcir_dtype)i;
            return true;
        }
    return false;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float mcir_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 */
        float f = (float)mant * 0x1p-24f;
        return sign ? -f : f;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t mcir_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) /* inf or nan */
        return sign | 0x7c00 | (absu > 0x7f800000u ? 0x200 : 0);
    if (absu >= 0x477ff000u) /* rounds to >= 65520: inf */
        return sign | 0x7c00;
    if (absu < 0x38800000u) {
        /* subnormal half (or zero): round |f| / 2^-24 to nearest even */
        float a = bits_f32(absu) * 0x1p24f;
        return sign | (uint16_t)lrintf(a); /* default rounding: to even */
    }
    uint32_t mant = absu & 0x7fffff, exp = (absu >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

float mcir_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t mcir_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* --------------------------------------------------------------- tensors */

const char *mcir_tensor_kind_name(mcir_tensor_kind k) {
    static const char *const names[] = {"input", "weight", "intermediate", "output"};
    MCIR_ASSERT(k >= 0 && k <= MCIR_TENSOR_OUTPUT);
    return names[k];
}

static const char *const memory_state_names[] = {"materialized", "streaming",
                                                 "recomputable"};

const char *mcir_memory_state_name(mcir_memory_state s) {
    MCIR_ASSERT(s >= 0 && s <= MCIR_MEM_RECOMPUTABLE);
    return memory_state_names[s];
}

bool mcir_memory_state_parse(const char *s, mcir_memory_state *out) {
    for (int i = 0; i <= MCIR_MEM_RECOMPUTABLE; i++)
        if (strcmp(memory_state_names[i], s) == 0) {
            *out = (mcir_memory_state)i;
            return true;
        }
    return false;
}

int64_t mcir_tensor_numel(const mcir_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    return n;
}

int64_t mcir_tensor_bytes(const mcir_tensor *t) {
    return mcir_tensor_numel(t) * (int64_t)mcir_dtype_size(t->dtype);
}

void mcir_tensor_whole_shape(const mcir_tensor *t, int64_t *out) {
    for (int i = 0; i < t->rank; i++) out[i] = t->shape[i];
    if (t->shard_axis >= 0 && t->shard_axis < t->rank) out[t->shard_axis] *= t->shard_parts;
}

int64_t mcir_tensor_whole_numel(const mcir_tensor *t) {
    return mcir_tensor_numel(t) * (t->shard_axis >= 0 ? t->shard_parts : 1);
}

int64_t mcir_tensor_whole_bytes(const mcir_tensor *t) {
    return mcir_tensor_whole_numel(t) * (int64_t)mcir_dtype_size(t->dtype);
}

/* The part is `outer` x `blocks` runs of (extent along the axis / blocks)
 * x (inner elements): run (i, b) starts at element ((i * blocks + b) *
 * parts + r) * run of the whole. */
void mcir_tensor_take_part(const mcir_tensor *t, const void *whole, size_t size, int r, void *out) {
    if (t->shard_axis < 0 || t->shard_parts <= 1) {
        memcpy(out, whole, (size_t)mcir_tensor_numel(t) * size);
        return;
    }
    int64_t outer = 1, run = 1, blocks = t->shard_blocks > 1 ? t->shard_blocks : 1;
    for (int i = 0; i < t->shard_axis; i++) outer *= t->shape[i];
    for (int i = t->shard_axis; i < t->rank; i++) run *= t->shape[i];
    run /= blocks;
    size_t bytes = (size_t)run * size;
    for (int64_t i = 0; i < outer * blocks; i++)
        memcpy((char *)out + (size_t)i * bytes,
               (const char *)whole + (size_t)(i * t->shard_parts + r) * bytes, bytes);
}

char *mcir_shape_str(const mcir_tensor *t, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n > k ? n - k : 0, "[");
    for (int i = 0; i < t->rank; i++)
        k += (size_t)snprintf(buf + k, n > k ? n - k : 0, "%s%lld", i ? ", " : "",
                              (long long)t->shape[i]);
    snprintf(buf + k, n > k ? n - k : 0, "]");
    return buf;
}

/* ------------------------------------------------------------ seeded fill */

/* FNV-1a over the tensor name, mixed with the seed; then SplitMix64.
 * Element i takes the top 24 bits of the i-th output: u in [0, 1) exactly
 * representable in f32, value 2u - 1; integer dtypes take floor(16u) (in
 * [0, 16): valid indices for any axis of 16 or more), bool u >= 0.5.
 * See docs/ir.md. */
/* Element i of the whole tensor's sequence: SplitMix64's (i+1)-th output. */
static float seeded_at(const mcir_tensor *t, uint64_t state, float scale, int64_t i) {
    uint64_t z = state + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float u = (float)(z >> 40) * 0x1p-24f;
    if (t->dtype == MCIR_DTYPE_BOOL) return u >= 0.5f;
    if (mcir_dtype_is_integer(t->dtype)) return floorf(16.0f * u);
    return mcir_dtype_round(t->dtype, (2.0f * u - 1.0f) * scale);
}

void mcir_fill_seeded_part(const mcir_tensor *t, uint64_t seed, int r, float *out) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)t->name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    uint64_t state = h ^ (seed * 0x9e3779b97f4a7c15ull);
    int64_t whole[MCIR_MAX_RANK];
    mcir_tensor_whole_shape(t, whole);
    float scale = 1.0f;
    if (t->kind == MCIR_TENSOR_WEIGHT && t->rank >= 2) {
        int64_t fan_in = mcir_tensor_whole_numel(t) / whole[0];
        scale = 1.0f / sqrtf((float)fan_in);
    }
    bool sharded = t->shard_axis >= 0 && t->shard_parts > 1;
    int64_t outer = 1, run = mcir_tensor_numel(t);
    if (sharded) {   /* as mcir_tensor_take_part's runs */
        run = 1;
        for (int i = 0; i < t->shard_axis; i++) outer *= t->shape[i];
        for (int i = t->shard_axis; i < t->rank; i++) run *= t->shape[i];
        int64_t blocks = t->shard_blocks > 1 ? t->shard_blocks : 1;
        run /= blocks;
        outer *= blocks;
    }
    for (int64_t o = 0; o < outer; o++) {
        int64_t base = sharded ? (o * t->shard_parts + r) * run : 0;
        for (int64_t j = 0; j < run; j++) out[o * run + j] = seeded_at(t, state, scale, base + j);
    }
}

void mcir_fill_seeded(const mcir_tensor *t, uint64_t seed, float *out) {
    mcir_fill_seeded_part(t, seed, 0, out);
}
