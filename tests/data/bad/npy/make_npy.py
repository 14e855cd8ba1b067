#!/usr/bin/env python3
"""Writes the malformed .npy files of tests/data/bad/npy/ (and the valid
ones of tests/data/good/w/) byte by byte, without numpy, so the corpus can
be regenerated anywhere. Each bad file breaks one rule of mcir_npy_read."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
GOOD = os.path.join(HERE, "..", "..", "good", "w")


def header(descr, shape, fortran=False, version=(1, 0), extra=""):
    shp = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, %s}" % (
        descr, "True" if fortran else "False", shp, extra)
    lenbytes = 2 if version[0] == 1 else 4
    pre = 6 + 2 + lenbytes
    total = (pre + len(d) + 1 + 63) // 64 * 64
    d = d + " " * (total - pre - len(d) - 1) + "\n"
    fmt = "<H" if lenbytes == 2 else "<I"
    return b"\x93NUMPY" + bytes(version) + struct.pack(fmt, len(d)) + d.encode("latin1")


def f32(vals):
    return b"".join(struct.pack("<f", v) for v in vals)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    b = lambda name: os.path.join(HERE, name)
    four = [1.0, 2.0, 3.0, 4.0]
    write(b("big_endian.npy"), header(">f4", (4,)) + b"".join(struct.pack(">f", v) for v in four))
    write(b("fortran.npy"), header("<f4", (2, 2), fortran=True) + f32(four))
    write(b("float64.npy"), header("<f8", (4,)) + b"".join(struct.pack("<d", v) for v in four))
    write(b("int8.npy"), header("|i1", (4,)) + bytes([1, 2, 3, 4]))
    write(b("short_data.npy"), header("<f4", (4,)) + f32(four[:3]))
    write(b("long_data.npy"), header("<f4", (4,)) + f32(four + [5.0]))
    write(b("bad_magic.npy"), b"\x93NUMPZ\x01\x00" + header("<f4", (4,))[8:] + f32(four))
    write(b("bad_version.npy"), b"\x93NUMPY\x04\x00" + header("<f4", (4,))[8:] + f32(four))
    write(b("truncated_header.npy"), header("<f4", (4,))[:30])
    write(b("empty.npy"), b"")
    write(b("bad_header.npy"), header("<f4", (4,)).replace(b"'shape': (4,)", b"'shape': [4] "))
    write(b("unknown_key.npy"), header("<f4", (4,), extra="'x': 1, ") + f32(four))
    write(b("rank9.npy"), header("<f4", (1,) * 9) + f32([1.0]))
    # valid files the tests read
    write(os.path.join(GOOD, "w_f32.npy"), header("<f4", (8, 4)) + f32([i / 8 for i in range(32)]))
    write(os.path.join(GOOD, "b_f16_v2.npy"),
          header("<f2", (4,), version=(2, 0)) + b"".join(struct.pack("<e", v) for v in four))
    write(os.path.join(GOOD, "g_bf16_v3.npy"),
          header("<u2", (4,), version=(3, 0)) + b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16) for v in four))
    write(os.path.join(GOOD, "scalar.npy"), header("<f4", ()) + f32([0.5]))
    write(os.path.join(GOOD, "v4.npy"), header("<f4", (4,)) + f32(four))


if __name__ == "__main__":
    main()
