#!/usr/bin/env python3
"""Writes gmma_smem_desc.txt and tma_box.txt: where an sm_90a kernel's
16-bit operand elements lie in shared memory, for the emulator's wgmma
shared-memory descriptors and TMA tile loads (emu/cuda_emu_sm90.h). Written
from CuTe's statements, not from the emulator:

* NVIDIA/cutlass include/cute/atom/mma_traits_sm90_gmma.hpp, the comment of
  make_gmma_desc: the canonical layouts a GmmaDescriptor describes, in
  elements of a 16-bit type (T = 8 elements = one uint128_t),
    K-major  INTERLEAVE  Swizzle<0,4,3> o ((8,m),(T,2)):((1T,SBO),(1,LBO))
             B32         Swizzle<1,4,3> o ((8,m),(T,2)):((2T,SBO),(1,T))
             B64         Swizzle<2,4,3> o ((8,m),(T,2)):((4T,SBO),(1,T))
             B128        Swizzle<3,4,3> o ((8,m),(T,2)):((8T,SBO),(1,T))
    MN-major INTERLEAVE  Swizzle<0,4,3> o ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
             B32         Swizzle<1,4,3> o ((T,2,m),(8,k)):((1,T,LBO),(2T,SBO))
             B64         Swizzle<2,4,3> o ((T,4,m),(8,k)):((1,T,LBO),(4T,SBO))
             B128        Swizzle<3,4,3> o ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))
  (coordinates (MN, K); the swizzle acts on the byte address), and the
  atoms Layout_K_SW128_Atom<half> = Swizzle<3,4,3> o (8,64):(64,1) and
  Layout_MN_SW128_Atom<half> = Swizzle<3,4,3> o (64,8):(1,64) tiled over a
  whole operand tile, a wgmma k-step then starting 16 K-columns further
  (DescriptorIterator: the descriptor's start address advances, the
  swizzle is applied to the whole address);
* include/cute/swizzle.hpp: Swizzle<B,M,S>::apply(o) = o ^ ((o & (((1<<B)-1)
  << (M+S))) >> S);
* include/cute/arch/copy_sm90_desc.hpp, to_CUtensorMapSwizzle: Swizzle<1,4,3>
  / <2,4,3> / <3,4,3> of the shared-memory layout are the tensor map's
  CU_TENSOR_MAP_SWIZZLE_32B / 64B / 128B; the CUDA driver API reference of
  cuTensorMapEncodeTiled: a box of boxDim elements at the given coordinates
  (innermost first), ceil(boxDim[i] / elementStrides[i]) elements along
  dimension i, taken every elementStrides[i]-th, written row after row,
  out-of-bound elements zero (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE).
"""
import os

def flat(shape, stride):
    out = []
    for s, d in zip(shape, stride):
        if isinstance(s, tuple):
            out += flat(s, d)
        else:
            out.append((s, d))
    return out

def evaluate(shape, stride, i):
    idx = 0
    for s, d in flat(shape, stride):
        idx += (i % s) * d
        i //= s
    return idx

def swizzle(b, o, m=4, s=3):
    return o ^ ((o & (((1 << b) - 1) << (m + s))) >> s)

T = 8   # 16-bit elements per uint128_t
SWZ_BITS = {0: 0, 32: 1, 64: 2, 128: 3}

def canonical(major, swz, mn, lbo, sbo):
    """(shape, stride) in elements over (MN, K=16), lbo/sbo in bytes."""
    L, S = lbo // 2, sbo // 2
    if major == "K":
        w = {0: 1, 32: 2, 64: 4, 128: 8}[swz]
        if swz == 0:
            return ((8, mn // 8), (T, 2)), ((T, S), (1, L))
        return ((8, mn // 8), (T, 2)), ((w * T, S), (1, T))
    w = {0: 1, 32: 2, 64: 4, 128: 8}[swz]
    if swz == 0:
        return ((T, 1, mn // T), (8, 2)), ((1, T, S), (T, L))
    return ((T, w, mn // (T * w)), (8, 2)), ((1, T, L), (w * T, S))

def offsets_canonical(major, swz, mn, start, lbo, sbo):
    (sm, sk), (dm, dk) = canonical(major, swz, mn, lbo, sbo)
    rows = []
    for r in range(mn):
        for k in range(16):
            e = evaluate(sm, dm, r) + evaluate(sk, dk, k)
            rows.append((r, k, swizzle(SWZ_BITS[swz], start + 2 * e)))
    return rows

def atom_tiled(major, rows_mn, cols_k, r, k):
    """Byte offset of element (mn=r, k) of a 128B-swizzled operand tile made
    of CuTe atoms: K-major Layout_K_SW128_Atom (8 MN x 64 K) tiled MN
    first (tile_to_shape's default order: 64-column boxes one after
    another); MN-major Layout_MN_SW128_Atom (64 MN x 8 K) tiled K first
    (Step<_2,_1>: 64-wide MN boxes one after another)."""
    if major == "K":
        atom = evaluate((8, 64), (64, 1), 0)  # noqa: F841 (documentation)
        i, j = r // 8, k // 64
        off = evaluate((8,), (64,), r % 8) + (k % 64) + 512 * (i + (rows_mn // 8) * j)
    else:
        i, j = r // 64, k // 8
        off = (r % 64) + 64 * (k % 8) + 512 * (j + (cols_k // 8) * i)
    return swizzle(3, 2 * off)

def main_desc(f):
    f.write(
        "# wgmma shared-memory operand layouts (16-bit elements): for a\n"
        "# descriptor (major, swizzle, start, LBO, SBO), the byte offset from a\n"
        "# 1024-aligned shared base of each element (mn, k) of the operand's\n"
        "# MN x 16 tile. Source: CuTe (NVIDIA/cutlass), see gen_sm90_layouts.py:\n"
        "# the canonical layouts of make_gmma_desc (mma_traits_sm90_gmma.hpp),\n"
        "# the Layout_K/MN_SW128_Atom atoms tiled over a kernel's tile, and\n"
        "# cute::Swizzle. Independent of emu/cuda_emu.h.\n"
        "# case NAME MAJOR(K|MN) SWIZZLE(0|32|64|128) MN START LBO SBO, then\n"
        "# MN*16 lines: mn k byte\n")
    cases = [
        ("k_inter", "K", 0, 64, 0, 128, 256),
        ("k_inter_far", "K", 0, 64, 0, 2048, 128),
        ("k_sw32", "K", 32, 64, 0, 16, 256),
        ("k_sw64", "K", 64, 64, 0, 16, 512),
        ("k_sw128", "K", 128, 64, 0, 16, 1024),
        ("mn_inter", "MN", 0, 64, 0, 1024, 128),
        ("mn_sw32", "MN", 32, 64, 0, 512, 256),
        ("mn_sw64", "MN", 64, 64, 0, 1024, 512),
        ("mn_sw128", "MN", 128, 128, 0, 2048, 1024),
    ]
    for name, major, swz, mn, start, lbo, sbo in cases:
        f.write(f"case {name} {major} {swz} {mn} {start} {lbo} {sbo}\n")
        for r, k, b in offsets_canonical(major, swz, mn, start, lbo, sbo):
            f.write(f"{r} {k} {b}\n")
    # a Q/K tile of 64 rows x 128 head-dim columns (two 64-column TMA boxes),
    # k-step kk reads columns 16kk..16kk+15
    for kk in range(8):
        start = (kk // 4) * 64 * 128 + (kk % 4) * 32
        f.write(f"case q64x128_k{kk} K 128 64 {start} 16 1024\n")
        for r in range(64):
            for k in range(16):
                f.write(f"{r} {k} {atom_tiled('K', 64, 128, r, 16 * kk + k)}\n")
    # a V tile of 64 key rows (K) x 128 value columns (MN), boxes of 64 columns
    for kk in range(4):
        start = kk * 16 * 128
        f.write(f"case v64x128_k{kk} MN 128 128 {start} {64 * 128} 1024\n")
        for r in range(128):
            for k in range(16):
                f.write(f"{r} {k} {atom_tiled('MN', 128, 64, r, 16 * kk + k)}\n")
    # the sm_90a GEMM's transposed A: A stored [K, M], one 64-column TMA
    # box (64 M x 64 K rows) per consumer group, MN-major for wgmma
    # (tnspA); k-step kk reads K rows 16kk..16kk+15
    for kk in range(4):
        start = kk * 16 * 128
        f.write(f"case a_mn64x64_k{kk} MN 128 64 {start} {64 * 128} 1024\n")
        for r in range(64):
            for k in range(16):
                f.write(f"{r} {k} {atom_tiled('MN', 64, 64, r, 16 * kk + k)}\n")

def main_tma(f):
    f.write(
        "# TMA 2D tile loads (cp.async.bulk.tensor.2d, 16-bit elements): for a\n"
        "# tensor map (dims W x H, row stride in bytes, box, element strides,\n"
        "# swizzle) and box coordinates (c0 = column, c1 = row, may be negative\n"
        "# or past the end), which global element (row, col) lands at each\n"
        "# 2-byte slot of shared memory, or 'oob' (filled with zero). Source:\n"
        "# the CUDA driver API reference of cuTensorMapEncodeTiled and CuTe's\n"
        "# Swizzle<B,4,3> <-> CU_TENSOR_MAP_SWIZZLE_* (copy_sm90_desc.hpp),\n"
        "# see gen_sm90_layouts.py. Independent of emu/cuda_emu.h.\n"
        "# case NAME W H ROWSTRIDE BOX0 BOX1 ES1 SWIZZLE C0 C1, then lines:\n"
        "#   byte row col   or   byte oob\n")
    cases = [
        ("sw128_inside", 200, 40, 512, 64, 8, 1, 128, 64, 8),
        ("sw128_edge", 100, 21, 208, 64, 8, 1, 128, 64, 16),
        ("sw64_negative", 50, 30, 112, 32, 8, 1, 64, -16, -3),
        ("sw32_edge", 20, 10, 48, 16, 4, 1, 32, 8, 8),
        ("none_odd", 40, 13, 96, 24, 5, 1, 0, 32, 10),
        ("sw128_rowstep2", 64, 20, 128, 64, 8, 2, 128, 0, 15),
    ]
    for name, w, h, rs, b0, b1, es1, swz, c0, c1 in cases:
        f.write(f"case {name} {w} {h} {rs} {b0} {b1} {es1} {swz} {c0} {c1}\n")
        nrows = (b1 + es1 - 1) // es1
        for i in range(nrows):
            for j in range(b0):
                byte = swizzle(SWZ_BITS[swz], (i * b0 + j) * 2)
                row, col = c1 + i * es1, c0 + j
                if 0 <= row < h and 0 <= col < w:
                    f.write(f"{byte} {row} {col}\n")
                else:
                    f.write(f"{byte} oob\n")

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "gmma_smem_desc.txt"), "w") as f:
        main_desc(f)
    with open(os.path.join(here, "tma_box.txt"), "w") as f:
        main_tma(f)
