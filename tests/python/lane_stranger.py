"""A stranger at a rank's tcp lane port (tests/python/test_stripe_faults.py runs it inside a
test-bed host): it connects to HOST:PORT, sends what its mode says, waits for the rank to close
the connection and prints one JSON line of what happened:

    {"mode": ..., "connected": true, "sent": BYTES, "received": BYTES,
     "closed": "eof" | "reset" | null, "after_s": S}

closed = null: the rank kept the connection open for --wait seconds.  Modes:

    garbage  4096 random bytes (no hello at all)
    replay   a genuine hello (--hello HEX, 72 bytes), then, when a challenge (72 bytes) comes
             back, a random 40-byte response: it cannot prove the job's key
    hello    the hello alone, from a host that is no rank's: closed before a byte is read
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

CHALLENGE_BYTES = 72
RESPONSE_BYTES = 40


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            break
        data += part
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--mode", choices=("garbage", "replay", "hello"), required=True)
    parser.add_argument("--hello", default="", help="the hello to send, in hex")
    parser.add_argument("--wait", type=float, default=5.0, help="seconds to wait for the close")
    args = parser.parse_args()
    report: dict[str, object] = {"mode": args.mode, "connected": False, "sent": 0}
    received = 0
    start = time.monotonic()
    try:
        sock = socket.create_connection((args.host, args.port), timeout=args.wait)
    except OSError as exc:
        report.update(error=f"connect: {exc}", after_s=round(time.monotonic() - start, 3))
        print(json.dumps(report), flush=True)
        return 1
    report["connected"] = True
    closed = None
    with sock:
        sock.settimeout(args.wait)
        try:
            if args.mode == "garbage":
                sock.sendall(os.urandom(4096))
                report["sent"] = 4096
            else:
                hello = bytes.fromhex(args.hello)
                sock.sendall(hello)
                report["sent"] = len(hello)
                if args.mode == "replay":
                    challenge = _recv_exact(sock, CHALLENGE_BYTES)
                    received += len(challenge)
                    report["challenge"] = len(challenge) == CHALLENGE_BYTES
                    if len(challenge) == CHALLENGE_BYTES:
                        sock.sendall(os.urandom(RESPONSE_BYTES))
                        report["sent"] = len(hello) + RESPONSE_BYTES
            while True:
                data = sock.recv(65536)
                if not data:
                    closed = "eof"
                    break
                received += len(data)
        except (ConnectionResetError, BrokenPipeError):
            closed = "reset"
        except socket.timeout:  # TimeoutError from Python 3.10 on; 3.9 is supported
            closed = None
    report.update(received=received, closed=closed, after_s=round(time.monotonic() - start, 3))
    print(json.dumps(report), flush=True)
    return 0 if closed else 1


if __name__ == "__main__":
    sys.exit(main())
