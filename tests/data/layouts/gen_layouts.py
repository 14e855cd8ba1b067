#!/usr/bin/env python3
"""Writes mma_m16n8k16.txt and wgmma_m64nNk16.txt (below). mma_m16n8k16.txt: the thread/value -> (row, col) maps of
mma.sync.aligned.m16n8k16.row.col (f16 / bf16 inputs, f32 or f16
accumulators), evaluated from CuTe's layout definitions, transcribed below
from NVIDIA/cutlass include/cute/atom/mma_traits_sm80.hpp
(MMA_Traits<SM80_16x8x16_F16F16F16F16_TN>, shared by the F32F16F16F32 and
F32BF16BF16F32 variants). Not derived from emu/cuda_emu.h.

A CuTe Layout (shape, stride) maps a (thread, value) coordinate to a linear
index of the operand tile in column-major order: A is (M=16, K=16), B is
(N=8, K=16), C/D is (M=16, N=8); index = row + rows * col.
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

def evaluate(mode_shape, mode_stride, i):
    # colexicographic: the leftmost sub-mode varies fastest
    idx = 0
    for s, d in flat(mode_shape, mode_stride):
        idx += (i % s) * d
        i //= s
    return idx

# (thread mode, value mode) shapes and strides, as in mma_traits_sm80.hpp
A = (((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)), 16)   # rows of the tile: M
B = (((4, 8), (2, 2)), ((16, 1), (8, 64)), 8)            # rows: N
C = (((4, 8), (2, 2)), ((32, 1), (16, 8)), 16)           # SM80_16x8_Row, rows: M

def rows(name, layout, what):
    (tshape, vshape), (tstride, vstride), nrows = layout
    nval = 1
    for s, _ in flat(vshape, vstride):
        nval *= s
    lines = []
    for lane in range(32):
        for v in range(nval):
            idx = evaluate(tshape, tstride, lane) + evaluate(vshape, vstride, v)
            r, c = idx % nrows, idx // nrows
            if name == "B":   # CuTe's B tile is (N, K); report (k, n) like the PTX figure
                r, c = c, r
            reg, half = (v // 2, v % 2) if name != "C" else (v, 0)
            lines.append(f"{name} {lane} {v} {reg} {half} {r} {c}")
    return lines

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "mma_m16n8k16.txt"), "w") as f:
        f.write(
            "# mma.sync.aligned.m16n8k16.row.col, f16/bf16 A and B, f32 C/D: which\n"
            "# matrix element each lane's fragment value holds.\n"
            "# Source: CuTe, NVIDIA/cutlass include/cute/atom/mma_traits_sm80.hpp,\n"
            "# MMA_Traits<SM80_16x8x16_F16F16F16F16_TN> ALayout / BLayout / CLayout\n"
            "# (the F32F16F16F32 and F32BF16BF16F32 traits inherit them), evaluated by\n"
            "# tests/data/layouts/gen_layouts.py. Independent of emu/cuda_emu.h.\n"
            "# Columns: operand lane value reg half row col\n"
            "#   A: value v of the 8 halves in a0..a3 -> A[row=m][col=k]\n"
            "#   B: value v of the 4 halves in b0..b1 -> B[row=k][col=n]\n"
            "#   C: value v = c[v] (f32 accumulator) -> C[row=m][col=n]\n"
            "#   reg = v / 2 for A and B (CuTe's half arrays are the registers\n"
            "#   reinterpreted), half 0 = bits 0..15, 1 = bits 16..31; reg = v for C.\n")
        for name, layout in (("A", A), ("B", B), ("C", C)):
            f.write("\n".join(rows(name, layout, name)) + "\n")

# wgmma (SM90 GMMA), from NVIDIA/cutlass include/cute/atom/mma_traits_sm90_gmma.hpp:
# GMMA::CLayout_64xN = ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512)) over the
# (M=64, N) accumulator tile, 128 threads (a warp group); the register-source
# A operand of 16-bit types is GMMA::ALayout_64x16 = CLayout_64x16 over the
# (M=64, K=16) tile.
WGMMA_N = (8, 16, 64, 128)

def gmma_c(n):
    return (((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)), 64)

def gmma_rows(name, layout):
    (tshape, vshape), (tstride, vstride), nrows = layout
    nval = 1
    for s_, _ in flat(vshape, vstride):
        nval *= s_
    out = []
    for t in range(128):
        for v in range(nval):
            idx = evaluate(tshape, tstride, t) + evaluate(vshape, vstride, v)
            out.append(f"{name} {t} {v} {idx % nrows} {idx // nrows}")
    return out

def main_wgmma():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "wgmma_m64nNk16.txt"), "w") as f:
        f.write(
            "# wgmma.mma_async.m64nNk16 (f16/bf16 inputs, f32 accumulators): which\n"
            "# tile element each thread's fragment value holds, for a later emulator.\n"
            "# Source: CuTe, NVIDIA/cutlass include/cute/atom/mma_traits_sm90_gmma.hpp,\n"
            "# GMMA::CLayout_64xN (accumulator C/D, N = " + ", ".join(map(str, WGMMA_N)) + " here;\n"
            "# other N follow the same rule with N/8 value groups) and GMMA::ALayout_64x16\n"
            "# (A from registers, 16-bit types), evaluated by gen_layouts.py.\n"
            "# Independent of emu/cuda_emu.h.\n"
            "# Columns: operand thread value row col\n"
            "#   C<N>: thread 0..127 of the warp group, value v = d[v] (f32) -> D[row=m][col=n]\n"
            "#   A:    value v of the 8 halves in a0..a3 (reg v/2, half v%2) -> A[row=m][col=k]\n")
        lines = []
        for n in WGMMA_N:
            lines += gmma_rows(f"C{n}", gmma_c(n))
        lines += gmma_rows("A", gmma_c(16))
        f.write("\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
    main_wgmma()
