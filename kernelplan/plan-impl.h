/*
 * plan-impl.h — internals shared by the files of the kernel plan
 * (partition.c, tiling.c, memory.c, plan_json.c, svg.c). Not public.
 */
#ifndef MCIR_PLAN_IMPL_H
#define MCIR_PLAN_IMPL_H

#include "kernelplan/kernelplan.h"

/* Chooses tiling, grid, block, shared memory and scratch of kernel k for
 * p->target (tiling.c). false, with an error at the anchor, if no tile
 * fits the target. */
bool mcir_plan_choose_tiling(mcir_plan *p, mcir_kernel_plan *k, mcir_diag *d);

/* Tile and launch of a MATMUL or CONV2D kernel (launch_gemm.c). */
bool mcir_launch_gemm(mcir_plan *p, mcir_kernel_plan *k, mcir_diag *d);

static inline int64_t plan_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Bytes in words: "16 KiB", "1.5 MiB", "200 B". */
char *mcir_plan_bytes_str(mcir_arena *a, int64_t bytes);

#endif /* MCIR_PLAN_IMPL_H */
