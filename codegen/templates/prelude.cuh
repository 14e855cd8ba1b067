// ---- mcir prelude: storage types, conversions, reductions (no headers:
// ---- NVRTC compiles this without any include path). No identifier here
// ---- may look like v<N>, vv<N> or p<N>: the compile-unit hash renumbers
// ---- those (the value functions; codegen/codegen.c, cg_compile_unit).
typedef long long i64;
typedef unsigned int u32;
typedef unsigned long long u64;
#define MC_INF __int_as_float(0x7f800000)
#define MC_NINF __int_as_float(0xff800000)

// Every global and shared memory access of the templates goes through these
// macros, so the CPU emulator of the tests (emu/cuda_emu.h, MC_EMULATE)
// can check it: bounds of the buffer the pointer belongs to, races between
// barriers, uninitialised reads, bytes requested. On the GPU they are the
// plain accesses. MC_GLD(p, i) / MC_GST(p, i, v): element i of kernel
// argument p; MC_GLDV(T, p, i) / MC_GSTV(T, p, i, v): a T-wide vector
// load / store at element i of p (T's alignment is the caller's to prove);
// MC_SLD(x) / MC_SST(x, v): the shared-memory lvalue x.
// MC_EMULATE also provides the conversions, dynamic shared memory and the
// warp primitives.
#ifndef MC_EMULATE
#define MC_GLD(p, i) ((p)[i])
#define MC_GST(p, i, v) ((p)[i] = (v))
#define MC_GLDV(T, p, i) (*(const T*)((p) + (i)))
// MC_GSTV is a plain (weak) store: __stwb's is strong (STG.E.128.STRONG.SM).
// NVVM splits a float4 struct store into scalars in a loop it unrolls at
// run time: the templates' loops of unknown trip count say #pragma unroll 1.
#define MC_GSTV(T, p, i, v) (*(T*)((p) + (i)) = (v))
#define MC_SLD(x) (x)
#define MC_SST(x, v) ((x) = (v))
#define MC_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
__device__ __forceinline__ float mc_f16_to_f32(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short mc_f32_to_f16(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float mc_bf16_to_f32(unsigned short h) {
    return __uint_as_float(((u32)h) << 16);
}
__device__ __forceinline__ unsigned short mc_f32_to_bf16(float f) {
    unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
#endif
__device__ __forceinline__ float mc_ld_f32(const float* p, i64 i) { return MC_GLD(p, i); }
__device__ __forceinline__ float mc_ld_f16(const unsigned short* p, i64 i) { return mc_f16_to_f32(MC_GLD(p, i)); }
__device__ __forceinline__ float mc_ld_bf16(const unsigned short* p, i64 i) { return mc_bf16_to_f32(MC_GLD(p, i)); }
__device__ __forceinline__ void mc_st_f32(float* p, i64 i, float v) { MC_GST(p, i, v); }
__device__ __forceinline__ void mc_st_f16(unsigned short* p, i64 i, float v) { MC_GST(p, i, mc_f32_to_f16(v)); }
__device__ __forceinline__ void mc_st_bf16(unsigned short* p, i64 i, float v) { MC_GST(p, i, mc_f32_to_bf16(v)); }
__device__ __forceinline__ float mc_round_f32(float v) { return v; }
__device__ __forceinline__ float mc_round_f16(float v) { return mc_f16_to_f32(mc_f32_to_f16(v)); }
__device__ __forceinline__ float mc_round_bf16(float v) { return mc_bf16_to_f32(mc_f32_to_bf16(v)); }
// Integer and bool storage seen as f32 (the float side of a cast; exact
// integer values are i64: prelude_int.cuh); rounding truncates toward zero
// and saturates at the type's range (NaN: 0), bool is v != 0 (value.c).
__device__ __forceinline__ float mc_sat(float v, float lo, float hi) {
    v = truncf(v);
    return v != v ? 0.0f : v < lo ? lo : v > hi ? hi : v;
}
__device__ __forceinline__ float mc_round_i32(float v) { return mc_sat(v, -2147483648.0f, 2147483648.0f); }
__device__ __forceinline__ float mc_round_i64(float v) { return mc_sat(v, -9223372036854775808.0f, 9223372036854775808.0f); }
__device__ __forceinline__ float mc_round_u8(float v) { return mc_sat(v, 0.0f, 255.0f); }
__device__ __forceinline__ float mc_round_bool(float v) { return v != 0.0f ? 1.0f : 0.0f; }
__device__ __forceinline__ float mc_ld_i32(const int* p, i64 i) { return (float)MC_GLD(p, i); }
__device__ __forceinline__ float mc_ld_i64(const long long* p, i64 i) { return (float)MC_GLD(p, i); }
__device__ __forceinline__ float mc_ld_u8(const unsigned char* p, i64 i) { return (float)MC_GLD(p, i); }
__device__ __forceinline__ float mc_ld_bool(const unsigned char* p, i64 i) { return MC_GLD(p, i) ? 1.0f : 0.0f; }
__device__ __forceinline__ void mc_st_i32(int* p, i64 i, float v) {
    v = mc_round_i32(v);
    MC_GST(p, i, v >= 2147483648.0f ? 2147483647 : (int)v);
}
__device__ __forceinline__ void mc_st_i64(long long* p, i64 i, float v) {
    v = mc_round_i64(v);
    MC_GST(p, i, v >= 9223372036854775808.0f ? 9223372036854775807LL : (long long)v);
}
__device__ __forceinline__ void mc_st_u8(unsigned char* p, i64 i, float v) { MC_GST(p, i, (unsigned char)mc_round_u8(v)); }
__device__ __forceinline__ void mc_st_bool(unsigned char* p, i64 i, float v) { MC_GST(p, i, (unsigned char)(v != 0.0f)); }
// Two f32 packed into one 32-bit register of f16x2 / bf16x2 (lo = a).
__device__ __forceinline__ u32 mc_pack_f16(float a, float b) {
    return (u32)mc_f32_to_f16(a) | ((u32)mc_f32_to_f16(b) << 16);
}
__device__ __forceinline__ u32 mc_pack_bf16(float a, float b) {
    return (u32)mc_f32_to_bf16(a) | ((u32)mc_f32_to_bf16(b) << 16);
}
// An add, subtract or multiply of two f16x2 / bf16x2 pairs, each half
// rounded once: the same bits as the f32 op of the halves, rounded (f32
// holds 2p + 2 bits of either type, so rounding twice is rounding once);
// one instruction on the GPU (bf16x2: sm_90), the f32 form elsewhere.
#define MC_PAIR_F32(name, op, ds)                                                        \
    __device__ __forceinline__ u32 mc_##name##2_##ds(u32 a, u32 b) {                     \
        return mc_pack_##ds(mc_##ds##_to_f32((unsigned short)(a & 0xffffu)) op           \
                                mc_##ds##_to_f32((unsigned short)(b & 0xffffu)),         \
                            mc_##ds##_to_f32((unsigned short)(a >> 16)) op               \
                                mc_##ds##_to_f32((unsigned short)(b >> 16)));            \
    }
#define MC_PAIR_PTX(name, ptx, ds)                                                       \
    __device__ __forceinline__ u32 mc_##name##2_##ds(u32 a, u32 b) {                     \
        u32 r;                                                                           \
        asm(ptx " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));                              \
        return r;                                                                        \
    }
#if !defined(MC_EMULATE) && defined(__CUDA_ARCH__)
MC_PAIR_PTX(add, "add.rn.f16x2", f16)
MC_PAIR_PTX(sub, "sub.rn.f16x2", f16)
MC_PAIR_PTX(mul, "mul.rn.f16x2", f16)
#else
MC_PAIR_F32(add, +, f16)
MC_PAIR_F32(sub, -, f16)
MC_PAIR_F32(mul, *, f16)
#endif
#if !defined(MC_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
MC_PAIR_PTX(add, "add.rn.bf16x2", bf16)
MC_PAIR_PTX(sub, "sub.rn.bf16x2", bf16)
MC_PAIR_PTX(mul, "mul.rn.bf16x2", bf16)
#else
MC_PAIR_F32(add, +, bf16)
MC_PAIR_F32(sub, -, bf16)
MC_PAIR_F32(mul, *, bf16)
#endif
// ReLU of an f16x2 / bf16x2 pair: max.NaN(x, +0) a half, one instruction
// on the GPU (HMNMX2; f16 and bf16: sm_80). Its halves as cuda_fp16.h
// documents __hmax2_nan: a NaN gives the canonical NaN (0x7fff), and +0 >
// -0, so -0 gives +0 (the f32 form, x < 0 ? 0 : x, keeps -0: equal, not
// the same bits); elsewhere those halves computed from the bits.
#define MC_RELU2_BITS(ds, expo, mant)                                                    \
    __device__ __forceinline__ u32 mc_relu2_##ds(u32 a) {                                \
        u32 r = 0u;                                                                      \
        for (int h = 0; h < 2; h++) {                                                    \
            const u32 x = (a >> (16 * h)) & 0xffffu;                                     \
            const u32 y = (x & (expo)) == (expo) && (x & (mant)) != 0u ? 0x7fffu         \
                          : (x & 0x8000u) != 0u                         ? 0u             \
                                                                        : x;             \
            r |= y << (16 * h);                                                          \
        }                                                                                \
        return r;                                                                        \
    }
#if !defined(MC_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ u32 mc_relu2_f16(u32 a) {
    u32 r;
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(0u));
    return r;
}
__device__ __forceinline__ u32 mc_relu2_bf16(u32 a) {
    u32 r;
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(0u));
    return r;
}
#else
MC_RELU2_BITS(f16, 0x7c00u, 0x03ffu)
MC_RELU2_BITS(bf16, 0x7f80u, 0x007fu)
#endif
// C += A·B, one warp-wide mma.sync m16n8k16 (row.col, f32 accumulation):
// per lane a: 4 registers of f16x2/bf16x2, b: 2, c: 4 floats, laid out as
// the PTX ISA's m16n8k16 figures (tests/data/layouts/mma_m16n8k16.txt).
// bf16 is a compile-time constant of the template (the branch folds away).
__device__ __forceinline__ void mc_mma_m16n8k16(float* c, const u32* a, const u32* b, const bool bf16) {
#ifdef MC_EMULATE
    emu_mma_m16n8k16(c, a, b, bf16);
#else
    if (bf16)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
// sm_80 (compiled only where a template uses them; the emulator models
// each: emu/cuda_emu_sm80.h).
// mc_cp_async<B>(dst, p, i, n): cp.async of B = 16, 8 or 4 bytes from
// element i of p into shared dst (both B-aligned; 16 through L2 only, .cg,
// 8 and 4 through L1 too, .ca, the only form of those sizes: rows of 8- or
// 4-byte alignment that a 16-byte copy cannot take), of which the first n
// come from global memory and the rest are zeros (n = 0: nothing is read,
// p + i need only be a valid address); the copy belongs to the thread's next
// commit group and is visible to the thread only after the
// mc_cp_async_wait that retires that group (to the block after a
// __syncthreads following it).
// mc_ldmatrix_x4 / _x2 (.trans): four / two 8x8 b16 matrices from shared
// memory into mma fragments; lanes 8q..8q+7 give the 16-byte rows of
// matrix q; lane l gets row l/4, columns 2(l%4), +1 of each (.trans: the
// transposed matrix's).
template <int B> __device__ __forceinline__ void mc_cp_async(void* dst, const unsigned short* p, i64 i, int n) {
    static_assert(B == 16 || B == 8 || B == 4, "cp.async copies 4, 8 or 16 bytes");
#ifdef MC_EMULATE
    emu_cp_async(dst, p, i, sizeof *p, B, n);
#else
    if (B == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((u32)__cvta_generic_to_shared(dst)),
                     "l"(p + i), "r"(n) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"((u32)__cvta_generic_to_shared(dst)),
                     "l"(p + i), "n"(B), "r"(n) : "memory");
#endif
}
__device__ __forceinline__ void mc_cp_async_commit() {
#ifdef MC_EMULATE
    emu_cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most KEEP of the thread's newest commit groups are pending.
template <int KEEP> __device__ __forceinline__ void mc_cp_async_wait() {
#ifdef MC_EMULATE
    emu_cp_async_wait(KEEP);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(KEEP) : "memory");
#endif
}
template <bool TRANS> __device__ __forceinline__ void mc_ldmatrix_x4(u32* r, const void* row) {
#ifdef MC_EMULATE
    emu_ldmatrix(r, __cvta_generic_to_shared(row), 4, TRANS);
#else
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"((u32)__cvta_generic_to_shared(row)) : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"((u32)__cvta_generic_to_shared(row)) : "memory");
#endif
}
template <bool TRANS> __device__ __forceinline__ void mc_ldmatrix_x2(u32* r, const void* row) {
#ifdef MC_EMULATE
    emu_ldmatrix(r, __cvta_generic_to_shared(row), 2, TRANS);
#else
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"((u32)__cvta_generic_to_shared(row)) : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"((u32)__cvta_generic_to_shared(row)) : "memory");
#endif
}
// The SFU's approximations, one MUFU instruction each (no IEEE slow path:
// the memory-bound templates call them once per element or once per row).
// mc_exp2: 2^x, ex2.approx.ftz (2 ulp; 2^-inf = 0, results below 2^-126
// flush to 0); mc_rcp: 1/x, rcp.approx.ftz (1 ulp); mc_rsqrt: 1/sqrt(x),
// rsqrt.approx.ftz (2 ulp); mc_log2: log2(x), lg2.approx.ftz (2^-22.6
// absolute; log2(0) = -inf). MC_L2E: log2(e), so e^x = mc_exp2(x * MC_L2E).
// The emulator computes them exactly and flushes as the GPU does.
#define MC_L2E 1.4426950408889634f
#ifdef MC_EMULATE
__device__ __forceinline__ float mc_ftz(float y) { return fabsf(y) < 1.17549435e-38f ? 0.0f * y : y; }
__device__ __forceinline__ float mc_exp2(float x) { return mc_ftz(exp2f(x)); }
__device__ __forceinline__ float mc_rcp(float x) { return mc_ftz(1.0f / mc_ftz(x)); }
__device__ __forceinline__ float mc_rsqrt(float x) { return mc_ftz(1.0f / sqrtf(mc_ftz(x))); }
__device__ __forceinline__ float mc_log2(float x) { return log2f(mc_ftz(x)); }
#else
__device__ __forceinline__ float mc_exp2(float x) {
    float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
__device__ __forceinline__ float mc_rcp(float x) {
    float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
__device__ __forceinline__ float mc_rsqrt(float x) {
    float y; asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
__device__ __forceinline__ float mc_log2(float x) {
    float y; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;
}
#endif
// mc_sin / mc_cos: sinf / cosf without a stack frame. x = q·(π/2) + r,
// |r| ≤ π/4, then a minimax polynomial of r by q mod 4 (Cephes' single
// precision coefficients, each step an explicit fmaf so the GPU and the
// emulator round alike). Up to |x| = 105615: a three-part Cody-Waite
// reduction in f32 (CUDA's constants). Beyond: Payne-Hanek in registers —
// x = m·2^E (m: 24 bits), and the 128 bits of 2/π that matter at E (the
// ones above give whole periods) from a table of 8 words; the 152-bit
// product m·W in five 32-bit limbs; its 64 bits at the binary point
// (2 of quadrant, 62 of fraction) picked by selects, not an array
// (CUDA's reduction keeps its limbs in a local array: the 32-byte frame).
// 2.1 ulp at most (CUDA documents 2 for sinf/cosf), checked against 300-bit
// values over the whole float range (tests/test_codegen_emu.c, trig).
static __device__ const unsigned int mc_two_over_pi[8] = {
    0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u,
    0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u};
__device__ __forceinline__ float mc_trig_reduce(float x, int* quadrant) {
    float ax = fabsf(x);
    if (ax <= 105615.0f) {
        float j = rintf(x * 0.636619772f);
        float r = fmaf(j, -1.5707962512969971e+00f, x);
        r = fmaf(j, -7.5497894158615964e-08f, r);
        r = fmaf(j, -5.3903029534742384e-15f, r);
        *quadrant = (int)j;
        return r;
    }
    if (!(ax <= 3.40282347e+38f)) {   // inf, NaN
        *quadrant = 0;
        return x - x;
    }
    unsigned int bits = (unsigned int)__float_as_int(ax);
    int e = (int)(bits >> 23) - 150;                    // ax = m · 2^e
    unsigned long long m = (bits & 0x7FFFFFu) | 0x800000u;
    int i0 = e > 1 ? (e - 2) >> 5 : 0;                  // words above give multiples of 4
    int s = e - 32 * i0;                                // in [-7, 33]
    unsigned long long pr3 = m * mc_two_over_pi[i0 + 3], pr2 = m * mc_two_over_pi[i0 + 2],
                       pr1 = m * mc_two_over_pi[i0 + 1], pr0 = m * mc_two_over_pi[i0];
    unsigned long long l1, l2, l3, l4, t;
    t = pr2 + (pr3 >> 32);
    l1 = t & 0xFFFFFFFFull;
    t = pr1 + (t >> 32);
    l2 = t & 0xFFFFFFFFull;
    t = pr0 + (t >> 32);
    l3 = t & 0xFFFFFFFFull;
    l4 = t >> 32;
    // Q = the 64 bits of the product from bit 66 - s (2 integer bits, 62 of fraction)
    int b = 66 - s;                                     // in [33, 73]
    unsigned long long lo = b < 64 ? (l1 | (l2 << 32)) : (l2 | (l3 << 32));
    unsigned long long hi = b < 64 ? l3 : l4;
    int sh = b < 64 ? b - 32 : b - 64;
    unsigned long long q64 = sh ? (lo >> sh) | (hi << (64 - sh)) : lo;
    int q = (int)(q64 >> 62);
    long long f = (long long)(q64 & 0x3FFFFFFFFFFFFFFFull);
    if (f >= (1LL << 61)) {   // nearer the next multiple of π/2
        f -= 1LL << 62;
        q += 1;
    }
    float r = (float)f * 3.40612158e-19f;               // π/2 · 2^-62
    if (x < 0.0f) {
        r = -r;
        q = -q;
    }
    *quadrant = q;
    return r;
}
__device__ __forceinline__ float mc_sin_poly(float r, float z) {
    return fmaf(r * z, fmaf(fmaf(-1.9515295891e-4f, z, 8.3321608736e-3f), z, -1.6666654611e-1f), r);
}
__device__ __forceinline__ float mc_cos_poly(float z) {
    float p = fmaf(fmaf(2.443315711809948e-5f, z, -1.388731625493765e-3f), z, 4.166664568298827e-2f);
    return fmaf(z * z, p, fmaf(-0.5f, z, 1.0f));
}
__device__ __forceinline__ float mc_sin(float x) {
    int q;
    float r = mc_trig_reduce(x, &q), z = r * r;
    float v = (q & 1) ? mc_cos_poly(z) : mc_sin_poly(r, z);
    return (q & 2) ? -v : v;
}
__device__ __forceinline__ float mc_cos(float x) {
    int q;
    float r = mc_trig_reduce(x, &q), z = r * r;
    float v = (q & 1) ? mc_sin_poly(r, z) : mc_cos_poly(z);
    return ((q + 1) & 2) ? -v : v;
}
// Thread-block clusters (sm_90+; the emulator has its own, emu/cuda_emu.h):
// mc_cluster_rank: %cluster_ctarank; mc_cluster_sync: every thread of the
// cluster arrives (release) and waits (acquire), so shared-memory writes
// before it are visible to the cluster's blocks after it; mc_dsmem_ld: a
// float2 at p (this block's shared memory) in the block of the given rank
// (mapa + ld.shared::cluster).
#if !defined(MC_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned mc_cluster_rank() {
    unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r;
}
__device__ __forceinline__ void mc_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ float2 mc_dsmem_ld(const float2* p, unsigned rank) {
    u32 a = (u32)__cvta_generic_to_shared(p), r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    float2 v;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(r) : "memory");
    return v;
}
#endif
// mc_stv: one st.global.v4 / .v2 of a 16- / 8-byte vector at a (aligned by
// the caller). NVVM scalarises a vector store whose alignment it fails to
// prove from the index (a cluster norm's first store of a step, whose
// column starts at rank * slice): the templates that meet that use these
// (no "memory" clobber: the store's value depends on the loads of its
// elements, and nothing reads it back in the kernel).
#ifndef MC_EMULATE
__device__ __forceinline__ void mc_stv(uint4* a, uint4 v) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" :: "l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}
__device__ __forceinline__ void mc_stv(uint2* a, uint2 v) {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" :: "l"(a), "r"(v.x), "r"(v.y));
}
__device__ __forceinline__ void mc_stv(float4* a, float4 v) {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(a), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w));
}
#endif
// NumPy maximum/minimum: a NaN in either operand propagates.
__device__ __forceinline__ float mc_max_nan(float a, float b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ float mc_min_nan(float a, float b) { return (a != a || a < b) ? a : b; }

__device__ __forceinline__ float mc_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float mc_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = mc_max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Block-wide sum / max; every thread gets the result. scratch: 32 floats.
__device__ __forceinline__ float mc_block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = mc_warp_sum(v);
    __syncthreads();
    if (lane == 0) MC_SST(scratch[warp], v);
    __syncthreads();
    v = lane < nw ? MC_SLD(scratch[lane]) : 0.0f;
    return mc_warp_sum(v);
}
__device__ __forceinline__ float mc_block_max(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = mc_warp_max(v);
    __syncthreads();
    if (lane == 0) MC_SST(scratch[warp], v);
    __syncthreads();
    v = lane < nw ? MC_SLD(scratch[lane]) : MC_NINF;
    return mc_warp_max(v);
}
// ---- end of prelude
