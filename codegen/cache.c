/*
 * cache.c — the on-disk kernel cache: one file per (source, arch, NVRTC
 * version), so compiling the same graph twice calls NVRTC once.
 *
 * Invariants: an entry is written through mcir_outfile (a temporary in
 * the cache directory renamed into place: readers never see half a file;
 * a link or device at the entry's path is written through); an
 * entry whose magic, key, sizes or checksum do not match is ignored (and
 * overwritten by the rebuild). A cache that cannot be read or written is
 * never an error: compilation just goes to NVRTC.
 *
 * Beside them, text entries DIR/<key>.<ext> (the SASS audit's nvdisasm
 * text of a cubin, codegen/sass.c): "MCIRTXT1 <key> <bytes>\n" and the
 * text; one whose first line or size does not match is ignored.
 *
 * Layout of DIR/<key>.kbin: "MCIRKC3\0", key[32], 9 x int64 (registers,
 * spill stores, spill loads, stack, static smem, ptx bytes, cubin bytes,
 * ptxas advisories, advisory text bytes), ptx, cubin, advisory text,
 * uint64 checksum. (Entries of versions 1 and 2, without the advisories,
 * are ignored and rebuilt.)
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen-impl.h"

static atomic_long cache_hits, cache_misses;

long mcir_cache_hits(void) { return atomic_load(&cache_hits); }
long mcir_cache_misses(void) { return atomic_load(&cache_misses); }

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

void cg_hash_key(char out[33], const char *source, const char *arch, const char *version) {
    const char *parts[] = {source, arch, version};
    uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(parts[i]);
        h1 = fnv1a(h1, parts[i], n + 1);
        h2 = fnv1a(h2 ^ (uint64_t)n, parts[i], n + 1);
    }
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}

bool mcir_cache_dir(char *buf, size_t n) {
    const char *e = getenv("MCIR_CACHE_DIR");
    if (e && *e) return (size_t)snprintf(buf, n, "%s", e) < n;
    e = getenv("XDG_CACHE_HOME");
    if (e && *e) return (size_t)snprintf(buf, n, "%s/mcir", e) < n;
    e = getenv("HOME");
    if (e && *e) return (size_t)snprintf(buf, n, "%s/.cache/mcir", e) < n;
    return false;
}

static bool mkdir_p(const char *path) {
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return false;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(tmp, 0755) == 0 || errno == EEXIST;
}

static bool entry_path(const char *key, char *buf, size_t n) {
    char dir[900];
    if (!mcir_cache_dir(dir, sizeof dir)) return false;
    return (size_t)snprintf(buf, n, "%s/%s.kbin", dir, key) < n;
}

static const char MAGIC[8] = "MCIRKC3";
enum { HDR_N = 9 };

bool cg_cache_load(const char *key, mcir_compiled *out) {
    char path[1024];
    memset(out, 0, sizeof *out);
    if (!entry_path(key, path, sizeof path)) goto miss;
    FILE *f = fopen(path, "rb");
    if (!f) goto miss;
    char magic[8], k[32];
    int64_t hdr[HDR_N];
    bool ok = fread(magic, 1, 8, f) == 8 && memcmp(magic, MAGIC, 8) == 0 &&
              fread(k, 1, 32, f) == 32 && memcmp(k, key, 32) == 0 &&
              fread(hdr, sizeof(int64_t), HDR_N, f) == HDR_N && hdr[5] >= 0 && hdr[6] >= 0 &&
              hdr[5] < (1ll << 30) && hdr[6] < (1ll << 30) && hdr[7] >= 0 && hdr[7] < (1ll << 30) &&
              hdr[8] >= 0 && hdr[8] < (int64_t)sizeof out->advisory;
    for (int i = 0; ok && i < 5; i++) ok = hdr[i] >= -1 && hdr[i] < (1ll << 30);
    if (ok) {
        out->registers = (int)hdr[0];
        out->spill_store_bytes = (int)hdr[1];
        out->spill_load_bytes = (int)hdr[2];
        out->spill_bytes = out->spill_store_bytes + out->spill_load_bytes;
        out->stack_bytes = (int)hdr[3];
        out->smem_static_bytes = (int)hdr[4];
        out->ptx_size = (size_t)hdr[5];
        out->cubin_size = (size_t)hdr[6];
        out->advisories = (int)hdr[7];
        out->ptx = malloc(out->ptx_size + 1);
        out->cubin = malloc(out->cubin_size + 1);
        uint64_t sum = 0;
        ok = out->ptx && out->cubin &&
             fread(out->ptx, 1, out->ptx_size, f) == out->ptx_size &&
             fread(out->cubin, 1, out->cubin_size, f) == out->cubin_size &&
             fread(out->advisory, 1, (size_t)hdr[8], f) == (size_t)hdr[8] &&
             fread(&sum, sizeof sum, 1, f) == 1;
        if (ok) {
            out->ptx[out->ptx_size] = 0;
            uint64_t h = fnv1a(1469598103934665603ull, hdr, sizeof hdr);
            h = fnv1a(h, out->ptx, out->ptx_size);
            h = fnv1a(h, out->cubin, out->cubin_size);
            h = fnv1a(h, out->advisory, (size_t)hdr[8]);
            ok = h == sum && fgetc(f) == EOF;
        }
    }
    fclose(f);
    if (!ok) {
        mcir_compiled_free(out);
        goto miss;
    }
    atomic_fetch_add(&cache_hits, 1);
    return true;
miss:
    atomic_fetch_add(&cache_misses, 1);
    return false;
}

void cg_cache_store(const char *key, const mcir_compiled *c) {
    char dir[900], path[1024];
    if (!mcir_cache_dir(dir, sizeof dir) || !mkdir_p(dir)) return;
    if (!entry_path(key, path, sizeof path)) return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return;
    size_t adv = strnlen(c->advisory, sizeof c->advisory - 1);
    int64_t hdr[HDR_N] = {c->registers,         c->spill_store_bytes, c->spill_load_bytes,
                          c->stack_bytes,       c->smem_static_bytes, (int64_t)c->ptx_size,
                          (int64_t)c->cubin_size, c->advisories,     (int64_t)adv};
    uint64_t h = fnv1a(1469598103934665603ull, hdr, sizeof hdr);
    h = fnv1a(h, c->ptx, c->ptx_size);
    h = fnv1a(h, c->cubin, c->cubin_size);
    h = fnv1a(h, c->advisory, adv);
    bool ok = fwrite(MAGIC, 1, 8, f) == 8 && fwrite(key, 1, 32, f) == 32 &&
              fwrite(hdr, sizeof(int64_t), HDR_N, f) == HDR_N &&
              fwrite(c->ptx, 1, c->ptx_size, f) == c->ptx_size &&
              fwrite(c->cubin, 1, c->cubin_size, f) == c->cubin_size &&
              fwrite(c->advisory, 1, adv, f) == adv && fwrite(&h, sizeof h, 1, f) == 1;
    ok = (fclose(f) == 0) && ok;
    /* through the one output helper (mcir/outfile.c: a temporary renamed
     * over a regular file, never over a link or a device); a cache entry
     * that cannot be written is not an error, so its message is dropped */
    FILE *null = ok ? fopen("/dev/null", "w") : NULL;
    if (null) {
        mcir_diag quiet = mcir_diag_to(null);
        mcir_outfile_write(path, buf, len, &quiet);
        fclose(null);
    }
    free(buf);
}

/* ------------------------------------------------------- text entries */

static bool text_path(const char *key, const char *ext, char *buf, size_t n) {
    char dir[900];
    if (!mcir_cache_dir(dir, sizeof dir)) return false;
    return (size_t)snprintf(buf, n, "%s/%s.%s", dir, key, ext) < n;
}

char *cg_cache_load_text(const char *key, const char *ext) {
    char path[1024], head[128];
    if (!text_path(key, ext, path, sizeof path)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    long long bytes = -1;
    char k[64];
    if (fgets(head, sizeof head, f) && sscanf(head, "MCIRTXT1 %63s %lld", k, &bytes) == 2 && strcmp(k, key) == 0 &&
        bytes >= 0 && bytes < (1ll << 31)) {
        text = malloc((size_t)bytes + 1);
        MCIR_ASSERT(text != NULL);
        if (fread(text, 1, (size_t)bytes, f) != (size_t)bytes || fgetc(f) != EOF) {
            free(text);
            text = NULL;
        } else {
            text[bytes] = 0;
        }
    }
    fclose(f);
    return text;
}

void cg_cache_store_text(const char *key, const char *ext, const char *text) {
    char dir[900], path[1024];
    if (!mcir_cache_dir(dir, sizeof dir) || !mkdir_p(dir) || !text_path(key, ext, path, sizeof path)) return;
    size_t n = strlen(text);
    char head[128];
    int h = snprintf(head, sizeof head, "MCIRTXT1 %s %lld\n", key, (long long)n);
    char *buf = malloc((size_t)h + n);
    MCIR_ASSERT(buf != NULL);
    memcpy(buf, head, (size_t)h);
    memcpy(buf + h, text, n);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        mcir_diag quiet = mcir_diag_to(null);
        mcir_outfile_write(path, buf, (size_t)h + n, &quiet);
        fclose(null);
    }
    free(buf);
}
