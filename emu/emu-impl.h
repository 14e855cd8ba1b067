/*
 * emu-impl.h — what the emulated device's parts share (device.c, blas.c,
 * compile.c): its memory (allocations with an initialised-byte shadow, the
 * names the runtime gave their ranges) and its findings.
 */
#ifndef MCIR_EMU_IMPL_H
#define MCIR_EMU_IMPL_H

#include "runtime/blas_api.h"
#include "emu/emu.h"

/* The allocation holding [p, p + bytes), its offset there, and the name of
 * the tensor the bytes belong to (the runtime's latest naming of a range
 * covering them; else "device memory"). NULL where no allocation holds all
 * of it. */
typedef struct emu_mem {
    unsigned char *base;
    size_t bytes;
    unsigned char *init;   /* per byte: written since allocation */
} emu_mem;
const emu_mem *emu_dev_find(uintptr_t p, size_t bytes, size_t *offset);
const char *emu_dev_name_of(uintptr_t p, uintptr_t *range_start, size_t *range_bytes);

/* Appends one finding line ("race|out-of-bounds|uninitialised|hang: WHAT")
 * to those emu_findings reports; emu_dev_clear_findings forgets them. */
void emu_dev_finding(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether the device's checks (MCIR_EMU_CHECKS) include the shadow of
 * what was written: launches keep it only then, so a library call or a
 * collective checks its reads against it only then. */
bool emu_dev_init_checked(void);
void emu_dev_clear_findings(void);

/* The device's injected failure state (MCIR_EMU_FAULT / MCIR_EMU_HANG):
 * the sticky CUresult, or 0; whether a launch never completes (work
 * queued behind it does not run). The library calls honour it. */
int emu_dev_sticky(void);
bool emu_dev_hung(void);

/* A library call issued on a stream that is capturing: `size` bytes of
 * its arguments are copied into the capture, and call(copy) runs at each
 * replay (nonzero: it failed); false where the stream is not capturing
 * (run the call now). */
bool emu_dev_capture_call(void *stream, int (*call)(const void *args), const void *args, size_t size);

/* The order between streams (device.c): an issue on `stream` (who: what
 * it is, for findings) touching these ranges — bytes 0: the tensor range
 * the runtime named around p — checked against what other streams issued
 * and no event or host wait orders before it: false, with a race finding,
 * where they meet. Then recorded. NULL or a capturing stream: unchecked. */
typedef struct emu_touch {
    uintptr_t p;
    size_t bytes;
    bool write;
} emu_touch;
bool emu_dev_stream_touch(void *stream, const char *who, int n, const emu_touch *t);

extern const mcir_blas_api emu_blas_api;
extern const struct mcir_coll_api emu_coll_api;   /* emu/coll.c */

/* The embedded emulator headers (emu/CMakeLists.txt; compile.c writes
 * them out and hashes them into mcir_emu_version). */
extern const char mcir_emu_header_cuda_emu[];
extern const size_t mcir_emu_header_cuda_emu_size;
extern const char mcir_emu_header_cuda_emu_sm80[];
extern const size_t mcir_emu_header_cuda_emu_sm80_size;
extern const char mcir_emu_header_cuda_emu_sm90[];
extern const size_t mcir_emu_header_cuda_emu_sm90_size;

#endif /* MCIR_EMU_IMPL_H */
