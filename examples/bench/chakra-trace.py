#!/usr/bin/env python3
"""Writes a synthetic Chakra execution trace for benchmarks: RANKS files
t.R.et, each a chain of ITERATIONS times (COMPUTE COMP nodes of 1 us, then
an all-reduce COMM_COLL node of 64 KiB over every rank), in file order.

    python3 examples/bench/chakra-trace.py RANKS ITERATIONS COMPUTE DIR
"""
import os
import sys


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(tag, b):
    return varint(tag << 3 | 2) + varint(len(b)) + b


def number(tag, v):
    return varint(tag << 3) + varint(v)


def attr_int(name, v):
    return field(10, field(1, name.encode()) + number(9, v))


def node(nid, kind, deps, micros=0, attrs=b""):
    m = number(1, nid) + field(2, b"n") + number(3, kind)
    if deps:
        m += field(5, b"".join(varint(d) for d in deps))
    if micros:
        m += number(7, micros)
    return m + attrs


def main():
    ranks, iterations, compute = (int(a) for a in sys.argv[1:4])
    out = sys.argv[4]
    os.makedirs(out, exist_ok=True)
    for r in range(ranks):
        buf = bytearray()
        meta = field(1, b"0.0.4")
        buf += varint(len(meta)) + meta
        nid, last = 0, None
        for _ in range(iterations):
            for _ in range(compute):
                m = node(nid, 4, [] if last is None else [last], 1)
                buf += varint(len(m)) + m
                last, nid = nid, nid + 1
            m = node(nid, 7, [last], 0, attr_int("comm_type", 0) + attr_int("comm_size", 65536))
            buf += varint(len(m)) + m
            last, nid = nid, nid + 1
        with open(os.path.join(out, f"t.{r}.et"), "wb") as f:
            f.write(buf)


if __name__ == "__main__":
    main()
