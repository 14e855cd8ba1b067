"""ctypes bindings of libmcir_capi.so (python/capi/mcir_capi.c).

The library is found, in order: the MCIR_CAPI_LIB environment variable (a
path to the .so: a build of one's own), then inside this package (what
`pip install ./python` puts there), then the repository's build/python/ (a
source checkout used in place, PYTHONPATH=python, after scripts/build.sh).
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_CANDIDATES = [
    os.path.join(_HERE, "libmcir_capi.so"),
    os.path.join(_HERE, "..", "..", "build", "python", "libmcir_capi.so"),
]

NO_REWRITE, CODE, PTX, EXACT_MATH = 1, 2, 4, 8
CAPI_VERSION = 8


class McirError(Exception):
    """A compilation or run failed; the message holds mcir's diagnostics
    (PATH:LINE:COL: error: ... lines)."""


def _find():
    env = os.environ.get("MCIR_CAPI_LIB")
    if env:
        return env
    for c in _CANDIDATES:
        if os.path.exists(c):
            return os.path.abspath(c)
    raise McirError(
        "libmcir_capi.so not found: `pip install ./python` builds it into the package; a "
        "source checkout used in place needs scripts/build.sh (build/python/), or set "
        "MCIR_CAPI_LIB to the library's path")


_lib = None
_path = None


def library_path():
    """The path of the libmcir_capi.so this package loads."""
    lib()
    return _path


# mcir_capi_collective_fn: (ctx, op, reduce, axis, ranks, integer, ndim,
# shape, in, out) -> 0 on success
COLLECTIVE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                 ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_longlong), ctypes.c_void_p,
                                 ctypes.c_void_p)


def lib():
    """The loaded library, its functions typed."""
    global _lib, _path
    if _lib is not None:
        return _lib
    path = _find()
    try:
        L = ctypes.CDLL(path)
    except OSError as e:
        raise McirError("cannot load %s: %s" % (path, e)) from None
    c_char_pp = ctypes.POINTER(ctypes.c_char_p)
    c_void_pp = ctypes.POINTER(ctypes.c_void_p)
    c_ll_p = ctypes.POINTER(ctypes.c_longlong)
    L.mcir_capi_version.restype = ctypes.c_int
    L.mcir_capi_compile.restype = ctypes.c_void_p
    L.mcir_capi_compile.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, c_char_pp,
                                    c_void_pp, c_ll_p, ctypes.c_char_p, ctypes.c_int, c_char_pp,
                                    ctypes.c_int]
    L.mcir_capi_free.argtypes = [ctypes.c_void_p]
    L.mcir_capi_status.argtypes = [ctypes.c_void_p]
    L.mcir_capi_status.restype = ctypes.c_int
    L.mcir_capi_errors.argtypes = [ctypes.c_void_p]
    L.mcir_capi_errors.restype = ctypes.c_char_p
    L.mcir_capi_artifact.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    L.mcir_capi_artifact.restype = ctypes.c_char_p
    ip = ctypes.POINTER(ctypes.c_int)
    L.mcir_capi_counts.argtypes = [ctypes.c_void_p, ip, ip, ip, ip]
    ull_p = ctypes.POINTER(ctypes.c_ulonglong)
    L.mcir_capi_run_device.restype = ctypes.c_int
    L.mcir_capi_run_device.argtypes = [ctypes.c_void_p, ctypes.c_int, c_char_pp, ull_p, c_ll_p,
                                       ull_p, c_ll_p]
    L.mcir_capi_output.restype = ctypes.c_int
    L.mcir_capi_output.argtypes = [ctypes.c_void_p, ctypes.c_int, c_char_pp, c_ll_p]
    L.mcir_capi_bind.restype = ctypes.c_int
    L.mcir_capi_bind.argtypes = [ctypes.c_void_p, ctypes.c_int, c_char_pp, ip, c_ll_p]
    L.mcir_capi_dim.restype = ctypes.c_int
    L.mcir_capi_dim.argtypes = [ctypes.c_void_p, ctypes.c_int, c_char_pp, c_ll_p, c_ll_p, c_ll_p]
    L.mcir_capi_run.restype = ctypes.c_int
    L.mcir_capi_run.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, c_char_pp,
                                c_void_pp, c_ll_p, c_void_pp, c_ll_p, ctypes.c_ulonglong]
    L.mcir_capi_set_group.restype = ctypes.c_int
    L.mcir_capi_set_group.argtypes = [ctypes.c_void_p, ctypes.c_int, COLLECTIVE_FN,
                                      ctypes.c_void_p]
    L.mcir_capi_set_graphs.restype = ctypes.c_int
    L.mcir_capi_set_graphs.argtypes = [ctypes.c_void_p, ctypes.c_int]
    L.mcir_capi_last_step.restype = None
    L.mcir_capi_last_step.argtypes = [ctypes.c_void_p, ip, ip]
    if L.mcir_capi_version() != CAPI_VERSION:
        raise McirError("%s speaks version %d, this package %d: rebuild it (pip install "
                        "./python, or scripts/build.sh)" % (path, L.mcir_capi_version(),
                                                           CAPI_VERSION))
    _lib, _path = L, path
    return L


def strings(items):
    arr = (ctypes.c_char_p * max(1, len(items)))()
    for i, s in enumerate(items):
        arr[i] = s.encode()
    return arr


def pointers(arrays):
    arr = (ctypes.c_void_p * max(1, len(arrays)))()
    for i, a in enumerate(arrays):
        arr[i] = a.ctypes.data
    return arr


def sizes(arrays):
    arr = (ctypes.c_longlong * max(1, len(arrays)))()
    for i, a in enumerate(arrays):
        arr[i] = a.nbytes
    return arr
