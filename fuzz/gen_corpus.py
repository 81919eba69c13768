#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/): valid and nearly valid
inputs in each target's input layout (see the comment at the top of each fuzz_*.c), so that a
run starts past what random bytes cannot find (the job id of a hello, a frame's right length).

Deterministic: running it again rewrites the same files.  Usage: fuzz/gen_corpus.py [DIR]
(default: the corpus folder next to this file)."""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path

# src/link/link_int.h and link.h
HELLO_MAGIC, CHALLENGE_MAGIC, RESPONSE_MAGIC = 0x4D4C4E48, 0x4D4C4E43, 0x4D4C4E52
LINK_VERSION = 1
AUTH, AEAD, NONE = 0, 1, 2
AES, CHACHA = 1, 2
TAG = 16
# src/p2p/lane_tcp_int.h
FRAME, EARLY, END = 0x4D4C4E46, 0x4D4C4E59, 0x4D4C4E45

# fuzz/fuzz_link.h: the fixed key and its id (BLAKE2b keyed by the key, as link_job.c does)
KEY = bytes((0xA5 ^ (i * 7)) & 0xFF for i in range(32))
JOB_ID = hashlib.blake2b(b"multilane job id\0", key=KEY, digest_size=16).digest()


def hello(
    mode: int,
    cipher: int,
    pmac: int,
    *,
    lane: int = 0,
    nlanes: int = 1,
    src: int = 0,
    dst: int = 1,
    version: int = LINK_VERSION,
    job: bytes = JOB_ID,
    magic: int = HELLO_MAGIC,
) -> bytes:
    head = struct.pack("<IBBBBIIii", magic, version, mode, cipher, pmac, lane, nlanes, src, dst)
    return head + job + bytes(range(32))


def hello_input(h: bytes, rest: bytes, wsize: int = 2, me: int = 1) -> bytes:
    return struct.pack("<BbB", wsize, me, len(h)) + h + rest


CHALLENGE = struct.pack("<II", CHALLENGE_MAGIC, 0) + bytes(range(32, 64)) + bytes(32)
RESPONSE = struct.pack("<II", RESPONSE_MAGIC, 0) + bytes(32)


def hello_seeds() -> dict[str, bytes]:
    seeds = {}
    names = {AUTH: "auth", AEAD: "aead", NONE: "none"}
    for mode in (AUTH, AEAD, NONE):
        for cipher in (AES, CHACHA):
            for pmac in (0, 1):
                name = f"{names[mode]}-{'aes' if cipher == AES else 'chacha'}-mac{pmac}"
                rest = CHALLENGE if pmac == 0 else RESPONSE
                seeds[name] = hello_input(hello(mode, cipher, pmac, lane=1, nlanes=4), rest)
    good = hello(AUTH, AES, 0)
    seeds["bad-short"] = hello_input(good[:-1], RESPONSE)
    seeds["bad-long"] = hello_input(good + b"\0", RESPONSE)
    seeds["bad-version"] = hello_input(hello(AUTH, AES, 0, version=2), CHALLENGE)
    seeds["bad-job"] = hello_input(hello(AUTH, AES, 0, job=bytes(16)), CHALLENGE)
    seeds["bad-magic"] = hello_input(hello(AUTH, AES, 0, magic=0x484E4C4D), CHALLENGE)
    seeds["bad-lane"] = hello_input(hello(AEAD, CHACHA, 0, lane=4, nlanes=4), CHALLENGE)
    seeds["bad-nlanes"] = hello_input(hello(AEAD, CHACHA, 0, lane=0, nlanes=65), CHALLENGE)
    seeds["bad-nolanes"] = hello_input(hello(AEAD, CHACHA, 0, lane=0, nlanes=0), CHALLENGE)
    seeds["bad-src"] = hello_input(hello(NONE, AES, 0, src=2), RESPONSE)
    seeds["bad-src-neg"] = hello_input(hello(NONE, AES, 0, src=-1), RESPONSE)
    seeds["bad-dst"] = hello_input(hello(NONE, AES, 1, dst=0), RESPONSE)
    seeds["big-world"] = hello_input(hello(AUTH, AES, 1, src=200, dst=-3), RESPONSE, 255, -3)
    # the genuine handshake with bit 0 of byte 4 flipped, in the challenge and in the response:
    # the 4 reserved bytes after each magic (docs/FUZZING.md, finding 1)
    seeds["reserved-challenge"] = hello_input(hello(AUTH, CHACHA, 0), bytes([32, 0]))
    seeds["reserved-response"] = hello_input(hello(AEAD, AES, 1), bytes([0, 0, 32, 0]))
    return seeds


# fuzz/fuzz_frames.c: its 8 links are jobs {2, 0, 6, 1, 5, 3, 9, 4} of fuzz_link.h
LINK_MODES = [(NONE, 0), (AUTH, 0), (AUTH, 1), (AEAD, 0)] * 2


def tags(k: int) -> tuple[int, int]:
    mode, pmac = LINK_MODES[k]
    return (0 if mode == NONE else TAG, TAG if mode == AEAD or (mode == AUTH and pmac) else 0)


def frame_spec(hdr: bytes, payload: bytes) -> bytes:
    return struct.pack("<BH", len(hdr), len(payload)) + hdr + payload


def op_sealed(hdr: bytes, payload: bytes, inplace: int = 1, flip: int = 0, bit: int = 0) -> bytes:
    return bytes([1 | inplace << 2 | flip << 3]) + frame_spec(hdr, payload) + struct.pack("<H", bit)


def op_forged(k: int, hdr: bytes, payload: bytes) -> bytes:
    ht, bt = tags(k)
    return (
        bytes([0])
        + struct.pack("<BH", len(hdr), len(payload))
        + hdr
        + bytes(ht)
        + payload
        + bytes(bt)
    )


def frames_seeds() -> dict[str, bytes]:
    hdr = struct.pack("<IIQQ", FRAME, 64, 7, 4096)  # a tcp lane's frame header
    payload = bytes(range(64))
    seeds = {}
    for k in range(8):
        seeds[f"link{k}-mixed"] = (
            bytes([k])
            + op_sealed(hdr, payload)
            + bytes([2])  # replay
            + op_forged(k, hdr, payload)
            + bytes([3 | 1 << 2])  # reorder, the first in place
            + frame_spec(hdr, payload[:16])
            + frame_spec(hdr[:8], b"")
        )
        seeds[f"link{k}-flips"] = bytes([k]) + b"".join(
            op_sealed(hdr, payload, inplace=flip % 2, flip=flip, bit=37 * flip) for flip in range(5)
        )
    seeds["link3-empty"] = bytes([3]) + op_sealed(b"", b"") + op_forged(3, b"", b"")
    return seeds


def tcp_input(recv: tuple[int, int, int, int, int], frames: bytes) -> bytes:
    """recv: (flags, chunk, total, cap, early chunks) of fuzz_tcp_frame.c's receive."""
    flags, chunk, total, cap, early = recv
    return struct.pack("<BIQIH", flags, chunk - 1, total, cap, early) + frames


def chunk_at(magic_sel: int, index: int, delta: int | None = None) -> bytes:
    """A frame at chunk `index` with the length the target computes (+ delta)."""
    if delta is None:
        return struct.pack("<BH", magic_sel, index)
    return struct.pack("<BHb", magic_sel | 32, index, delta)


def raw_frame(magic: int, off: int, length: int) -> bytes:
    return struct.pack("<BIQI", 3 | 4 | 16, magic, off, length)


def tcp_seeds() -> dict[str, bytes]:
    cts, mpi, nomap = 1, 2, 4
    return {
        "whole": tcp_input(
            (cts, 4096, 16384, 16384, 1),
            b"".join([chunk_at(1, 0)] + [chunk_at(0, i) for i in (1, 2, 3)]),
        ),
        "truncated": tcp_input(
            (cts, 4096, 20000, 10000, 2), b"".join([chunk_at(1, 0), chunk_at(1, 1), chunk_at(0, 2)])
        ),
        "early-past-accept": tcp_input(
            (cts, 4096, 16384, 1000, 4), b"".join(chunk_at(1, i) for i in range(4))
        ),
        "before-cts": tcp_input(
            (0, 1024, 5000, 8192, 5),
            b"".join([chunk_at(1, i) for i in range(5)] + [chunk_at(0, 1)]),
        ),
        "twice": tcp_input((cts, 512, 2048, 4096, 0), chunk_at(0, 1) + chunk_at(0, 1)),
        "wrong-len": tcp_input((cts, 512, 2000, 4096, 1), chunk_at(1, 0, -1) + chunk_at(0, 3, 1)),
        "mpi-lane": tcp_input((cts | mpi, 512, 2048, 4096, 1), chunk_at(1, 0) + chunk_at(0, 1)),
        "no-map": tcp_input((cts | nomap, 512, 2048, 4096, 1), chunk_at(1, 0)),
        "raw": tcp_input(
            (cts, 4096, 12288, 12288, 1),
            b"".join(
                [
                    raw_frame(FRAME, 4096, 4096),
                    raw_frame(END, 0, 0),
                    raw_frame(0xDEADBEEF, 8192, 4096),
                    raw_frame(FRAME, 2**64 - 4096, 4096),
                    raw_frame(EARLY, 0, 2**32 - 1),
                ]
            ),
        ),
        "unaligned": tcp_input((cts, 1000, 3000, 3000, 0), struct.pack("<BHb", 8, 1, 5)),
        "bytes": tcp_input((cts, 1, 300, 200, 10), b"".join(chunk_at(0, i) for i in range(10, 40))),
        "big-chunks": tcp_input((cts, 2**30, 2**33, 2**18, 2), chunk_at(1, 1) + chunk_at(0, 0)),
        "early-all": tcp_input(
            (0, 4096, 10000, 10000, 3), b"".join(chunk_at(1, i) for i in range(3))
        ),
    }


# src/relay/relay_int.h, relay_wire.c: the relays' frame header (little-endian, 56 bytes)
RELAY_MAGIC, RELAY_VERSION = 0x464E4C4D, 1
R_DATA, R_ACK, R_MATCHED, R_ABORT, R_FAIL, R_BYE = 1, 2, 3, 4, 5, 6
R_ALL = -1
RELAY_NRANKS = 6  # fuzz_relay_frame.c: sites a:2, b:3, c:1, 3 trunks


def relay_hdr(
    rtype: int,
    *,
    dst: int,
    src: int,
    trunk: int = 1,
    flags: int = 0,
    context: int = 0,
    tag: int = 0,
    length: int = 0,
    seq: int = 0,
    total: int = 0,
    offset: int = 0,
) -> bytes:
    return struct.pack(
        "<IBBBBHHiiIiIQQQ",
        RELAY_MAGIC,
        RELAY_VERSION,
        rtype,
        flags,
        0,
        trunk,
        0,
        dst,
        src,
        context,
        tag,
        length,
        seq,
        total,
        offset,
    )


def relay_input(job: int, scope: int, parse: bytes, ops: bytes) -> bytes:
    """job: mode (k % 3: auth, aead, none), payload MAC ((k // 3) % 2), AES ((k // 6) % 2);
    scope: 0 a rank's link, 1 a WAN link, 2 a rank's view, 3 any (fuzz_relay_frame.c)."""
    return struct.pack("<BB", job, scope) + parse + ops


def relay_op_sealed(hdr: bytes, payload: bytes) -> bytes:
    return struct.pack("<BH", 1, len(payload)) + hdr + payload


def relay_op_frame(rtype: int, trunk: int, dst: int, src: int, payload: bytes) -> bytes:
    """A frame through the connection's queue: dst index (rank + 1), src, len, total extra."""
    return struct.pack("<BBBBBH", 2, rtype - 1, trunk, dst + 1, src, len(payload)) + b"\0" + payload


def relay_seeds() -> dict[str, bytes]:
    gw_b = RELAY_NRANKS + 1 * 64 + 1
    data = relay_hdr(R_DATA, dst=3, src=1, tag=5, length=16, seq=2, total=32, offset=16)
    wan = relay_hdr(R_DATA, dst=0, src=3, flags=3, length=8, total=8)
    fail = relay_hdr(R_FAIL, dst=R_ALL, src=gw_b, length=11)
    seeds = {}
    for job in range(12):
        seeds[f"rank-data-{job}"] = relay_input(
            job,
            0,
            data,
            relay_op_sealed(data, bytes(range(16)))
            + relay_op_frame(R_DATA, 1, 3, 1, b"x" * 40)
            + relay_op_sealed(relay_hdr(R_BYE, dst=R_ALL, src=1), b""),
        )
    seeds["wan-mixed"] = relay_input(
        1,
        1,
        wan,
        relay_op_sealed(wan, b"abcdefgh")
        + relay_op_sealed(fail, b"site lost!!")
        + relay_op_sealed(relay_hdr(R_ACK, dst=1, src=4, offset=999), b""),
    )
    seeds["rank-view-abort"] = relay_input(
        0,
        2,
        relay_hdr(R_ABORT, dst=R_ALL, src=4, tag=-3, length=4),
        relay_op_sealed(relay_hdr(R_MATCHED, dst=1, src=2, seq=9), b"")
        + relay_op_sealed(relay_hdr(R_ABORT, dst=R_ALL, src=4, tag=-3, length=4), b"oops"),
    )
    seeds["forged-src"] = relay_input(
        2,
        0,
        relay_hdr(R_DATA, dst=3, src=0, length=4, total=4),
        relay_op_sealed(relay_hdr(R_DATA, dst=3, src=0, length=4, total=4), b"evil"),
    )
    seeds["truncated"] = relay_input(1, 3, data, struct.pack("<BH", 0, 30) + data[:30])
    return seeds


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus"
    for target, seeds in (
        ("fuzz_hello", hello_seeds()),
        ("fuzz_frames", frames_seeds()),
        ("fuzz_tcp_frame", tcp_seeds()),
        ("fuzz_relay_frame", relay_seeds()),
    ):
        folder = out / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (folder / name).write_bytes(data)
        print(f"{folder}: {len(seeds)} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
