// ---- mcir integer prelude: only in kernels that read, write or compute an
// ---- integer or bool tensor (cg_begin_source). Value functions of such
// tensors return i64, exact: an i32, u8 or bool value is held wrapped into
// its dtype's range, arithmetic wraps as two's complement (through unsigned
// types: no undefined overflow), and values convert only at an explicit
// cast — the reference interpreter's rules (mcir/ops_int.c, docs/ops.md
// "Integer semantics"). These overload the prelude's float forms of
// mc_round_* / mc_st_* by their i64 argument.
typedef unsigned long long mc_u64;
__device__ __forceinline__ i64 mc_ldi_i32(const int* p, i64 i) { return MC_GLD(p, i); }
__device__ __forceinline__ i64 mc_ldi_i64(const long long* p, i64 i) { return MC_GLD(p, i); }
__device__ __forceinline__ i64 mc_ldi_u8(const unsigned char* p, i64 i) { return MC_GLD(p, i); }
__device__ __forceinline__ i64 mc_ldi_bool(const unsigned char* p, i64 i) { return MC_GLD(p, i) ? 1 : 0; }
__device__ __forceinline__ i64 mc_round_i32(i64 v) { return (int)(u32)(mc_u64)v; }
__device__ __forceinline__ i64 mc_round_i64(i64 v) { return v; }
__device__ __forceinline__ i64 mc_round_u8(i64 v) { return (i64)((mc_u64)v & 0xffu); }
__device__ __forceinline__ i64 mc_round_bool(i64 v) { return v != 0 ? 1 : 0; }
__device__ __forceinline__ void mc_st_i32(int* p, i64 i, i64 v) { MC_GST(p, i, (int)(u32)(mc_u64)v); }
__device__ __forceinline__ void mc_st_i64(long long* p, i64 i, i64 v) { MC_GST(p, i, v); }
__device__ __forceinline__ void mc_st_u8(unsigned char* p, i64 i, i64 v) { MC_GST(p, i, (unsigned char)(mc_u64)v); }
__device__ __forceinline__ void mc_st_bool(unsigned char* p, i64 i, i64 v) { MC_GST(p, i, (unsigned char)(v != 0)); }
// float -> integer dtype (cast): truncate toward zero, saturate, NaN -> 0;
// bool is v != 0.
__device__ __forceinline__ i64 mc_f2i_i32(float v) {
    v = mc_round_i32(v);
    return v >= 2147483648.0f ? 2147483647LL : (i64)v;
}
__device__ __forceinline__ i64 mc_f2i_i64(float v) {
    v = mc_round_i64(v);
    return v >= 9223372036854775808.0f ? 9223372036854775807LL : (i64)v;
}
__device__ __forceinline__ i64 mc_f2i_u8(float v) { return (i64)mc_round_u8(v); }
__device__ __forceinline__ i64 mc_f2i_bool(float v) { return v != 0.0f ? 1 : 0; }
// Arithmetic: wraps; x / 0 and x % 0 are 0; division truncates toward zero;
// mc_imod is the remainder with the divisor's sign (floor division), mc_ifmod
// the dividend's (truncation); shifts by a count outside [0, bits) shift
// every bit out (NumPy).
__device__ __forceinline__ i64 mc_iadd(i64 a, i64 b) { return (i64)((mc_u64)a + (mc_u64)b); }
__device__ __forceinline__ i64 mc_isub(i64 a, i64 b) { return (i64)((mc_u64)a - (mc_u64)b); }
__device__ __forceinline__ i64 mc_imul(i64 a, i64 b) { return (i64)((mc_u64)a * (mc_u64)b); }
__device__ __forceinline__ i64 mc_ineg(i64 a) { return (i64)(0 - (mc_u64)a); }
__device__ __forceinline__ i64 mc_imax(i64 a, i64 b) { return a > b ? a : b; }
__device__ __forceinline__ i64 mc_imin(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ i64 mc_idiv(i64 a, i64 b) { return b == 0 ? 0 : b == -1 ? mc_ineg(a) : a / b; }
__device__ __forceinline__ i64 mc_ifmod(i64 a, i64 b) { return b == 0 || b == -1 ? 0 : a % b; }
__device__ __forceinline__ i64 mc_imod(i64 a, i64 b) {
    i64 r = mc_ifmod(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
__device__ __forceinline__ i64 mc_ishl(i64 a, i64 b, int bits) { return (mc_u64)b < (mc_u64)bits ? (i64)((mc_u64)a << b) : 0; }
__device__ __forceinline__ i64 mc_ishr(i64 a, i64 b, int bits) {
    if ((mc_u64)b >= (mc_u64)bits) return a < 0 ? -1 : 0;
    return a < 0 ? ~(~a >> b) : a >> b;
}
// An i64 across a warp shuffle: two 32-bit halves carried as float bits.
#ifdef MC_EMULATE
static inline u32 mc_float_bits(float f) { u32 u; memcpy(&u, &f, 4); return u; }
#else
__device__ __forceinline__ u32 mc_float_bits(float f) { return __float_as_uint(f); }
#endif
__device__ __forceinline__ i64 mc_shfl_xor_i64(i64 v, int o) {
    float lo = __uint_as_float((u32)(mc_u64)v), hi = __uint_as_float((u32)((mc_u64)v >> 32));
    lo = __shfl_xor_sync(0xffffffffu, lo, o);
    hi = __shfl_xor_sync(0xffffffffu, hi, o);
    return (i64)(((mc_u64)mc_float_bits(hi) << 32) | mc_float_bits(lo));
}
// ---- end of integer prelude
