"""mcir_seed.py — the seeded pseudo-random fill of mcir, bit-exact in numpy.

This reproduces ``mcir_fill_seeded`` in mcir/util.c exactly (see
docs/examples.md, "The seeded fill"):

    h     = FNV-1a 64 over the UTF-8 bytes of the tensor name
            (offset 0xcbf29ce484222325, prime 0x100000001b3)
    state = h ^ (seed * 0x9e3779b97f4a7c15)          (mod 2^64)
    for element i = 0, 1, ... (C order):
        state += 0x9e3779b97f4a7c15
        z  = state
        z  = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
        z  = (z ^ (z >> 27)) * 0x94d049bb133111eb
        z ^= z >> 31
        u  = float32(z >> 40) * 2^-24                 (exact in f32)
        v  = (2u - 1) * scale                         (f32 arithmetic)
        out[i] = round_to_dtype(v)                    (RNE for f16 / bf16)
    integer dtypes: out[i] = floor(16u); bool: out[i] = u >= 0.5

    scale = 1.0f / sqrtf((float)fan_in), fan_in = numel / shape[0], for
    weights of rank >= 2; scale = 1 otherwise (rank 0/1 weights, inputs).

Weights always use seed 0; runtime inputs use the run's seed (default 0).

``fill`` returns float32 values (already rounded to the storage dtype);
``to_storage`` converts them to the array that would be stored in a .npy
(<f4, <f2, or <u2 bit patterns for bf16).
"""
import numpy as np

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode("utf-8"):
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def f32_to_bf16_bits(x):
    """Round-to-nearest-even f32 -> bf16 bit patterns (as mcir_f32_to_bf16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    r = np.where(nan, (u >> 16) | 0x40, r)
    return r.astype(np.uint16)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_to_dtype(x, dtype):
    """Round float32 values to what the storage dtype holds, back as float32."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)  # numpy rounds to nearest even
    if dtype == "bf16":
        return bf16_bits_to_f32(f32_to_bf16_bits(x))
    raise ValueError("bad dtype %r" % dtype)


def to_storage(x, dtype):
    """float32 values -> the array a .npy of that mcir dtype holds."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x.astype("<f4")
    if dtype == "f16":
        return x.astype("<f2")
    if dtype == "bf16":
        return f32_to_bf16_bits(x).astype("<u2")
    raise ValueError("bad dtype %r" % dtype)


def scale_for(shape, kind):
    if kind == "weight" and len(shape) >= 2:
        fan_in = _numel(shape) // int(shape[0])
        return np.float32(1.0) / np.sqrt(np.float32(fan_in))
    return np.float32(1.0)


def fill(name, shape, dtype="f32", kind="weight", seed=0):
    """Seeded values of tensor `name` (float32 array of `shape`).

    kind is "weight" or "input"; weights always use seed 0 in mcir (the
    caller passes seed only for inputs)."""
    if kind not in ("weight", "input"):
        raise ValueError("kind must be 'weight' or 'input'")
    shape = tuple(int(s) for s in shape)
    n = _numel(shape)
    with np.errstate(over="ignore"):
        h = np.uint64(fnv1a64(name))
        state0 = h ^ (np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * _GOLDEN)
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = state0 + i * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z ^= z >> np.uint64(31)
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    if dtype == "bool":
        return (u >= np.float32(0.5)).astype(np.float32).reshape(shape)
    if dtype in ("i32", "i64", "u8"):   # floor(16u): small valid indices
        return np.floor(np.float32(16.0) * u).astype(np.float32).reshape(shape)
    v = (np.float32(2.0) * u - np.float32(1.0)) * scale_for(shape, kind)
    v = v.astype(np.float32)
    return round_to_dtype(v, dtype).reshape(shape)
