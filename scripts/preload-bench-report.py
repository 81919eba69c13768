#!/usr/bin/env python3
"""Tables of a scripts/preload-bench.sh run: preload-bench-report.py OUTDIR (Markdown on stdout).

Reads NetPIPE's output files (bytes, Mbit/s, one-way seconds per line), the layer's stats lines
in the run logs, the delay line's counters around each run (NAME.wan), the mln-stripe and
mln-matmul result JSON.  Rates in Mbit/s of 10^6 bit: bytes x 8 / the one-way time of a
ping-pong (NetPIPE's time: half a round trip, the best of its trials), as mln-stripe's ping-pong
(time_us: one-way).  NetPIPE's own "Mbps" column is in 2^20 bit/s (4.9% less)."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

STATS = re.compile(
    r"multilane-preload: rank=(\d+) .*striped_send_msgs=(\d+) striped_send_bytes=(\d+)"
    r" striped_recv_msgs=(\d+) striped_recv_bytes=(\d+) bcast_calls=(\d+) bcast_bytes=(\d+)"
)


MIB_BIT = 1048576.0  # NetPIPE's "Mbps": 2^20 bit/s
NPLINE = re.compile(r"(\d+) bytes\s+\d+ times -->\s+([\d.]+) Mbps in\s+([\d.]+) usec")


def netpipe(path: Path) -> dict[int, tuple[float, float]]:
    """bytes -> (Mbit/s, one-way us): NetPIPE's -o file, and where a run ended early (its file
    unwritten) the lines it printed (NAME.log).  The time comes from NetPIPE's rate column
    (2^20 bit/s, 6 decimals in the file), not its time column: that one has 0.01 us steps in
    the file and the log, 7% of a local one-way time of 0.13 us."""
    rows = {}

    def add(n: int, mbps: float) -> None:
        if mbps > 0:
            rows[n] = (mbps * MIB_BIT / 1e6, n * 8 / (mbps * MIB_BIT) * 1e6)

    log = path.with_suffix(".log")
    if log.exists():
        for m in NPLINE.finditer(log.read_text()):
            add(int(m.group(1)), float(m.group(2)))
    if path.exists():
        for line in path.read_text().split("\n"):
            f = line.split()
            if len(f) >= 3:
                add(int(f[0]), float(f[1]))
    return rows


def stats(log: Path) -> dict[int, list[int]]:
    out = {}
    if log.exists():
        for m in STATS.finditer(log.read_text()):
            out[int(m.group(1))] = [int(x) for x in m.groups()[1:]]
    return out


def wan(path: Path) -> tuple[int, int] | None:
    """bytes forwarded by the delay line during the run (both directions), queue+loss drops"""
    if not path.exists():
        return None
    lines = path.read_text().split("\n")
    vals = []
    for line in lines[:2]:
        kv = dict(x.split("=") for x in line.split()[1:])
        vals.append(kv)
    if len(vals) < 2:
        return None
    b = sum(int(vals[1][k]) - int(vals[0][k]) for k in ("ab", "ba"))
    d = sum(int(vals[1][k]) - int(vals[0][k]) for k in ("drops_ab", "drops_ba"))
    return b, d


def exit_code(out: Path, name: str) -> str:
    """the run's exit status as commands.txt recorded it"""
    text = (out / "commands.txt").read_text() if (out / "commands.txt").exists() else ""
    m = re.search(r"## " + re.escape(name) + r" .*?\n.*?\n# rc=(\d+) wall=(\d+)s", text)
    return f"{m.group(1)} after {m.group(2)} s" if m else "?"


def fmt(x: float, nd: int = 1) -> str:
    return f"{x:,.{nd}f}"


def stats_line(log: Path) -> str:
    s = stats(log)
    if not s:
        return "no stats line"
    sent = sum(v[1] for v in s.values())
    msgs = sum(v[0] for v in s.values())
    bc = sum(v[4] for v in s.values())
    bcb = sum(v[5] for v in s.values())
    return f"{len(s)} ranks: striped sends {msgs} ({sent:,} B), bcasts {bc} ({bcb:,} B)"


def main(out: Path) -> None:
    print(f"# preload-bench: {out.name}\n")
    check = out / "testbed-check.json"
    if check.exists():
        doc = json.loads(check.read_text())
        print(
            "testbed check: "
            + "; ".join(f"{r['item']}: {r['measured']}" for r in doc["rows"])
            + "\n"
        )

    mpis = sorted(
        {m.group(1) for p in out.glob("*-deb-*") if (m := re.search(r"-(deb-[a-z]+)-", p.name))},
        reverse=True,
    )
    # 1. NetPIPE sweep
    for mpi in mpis:
        plain = netpipe(out / f"np-bw-{mpi}-plain.out")
        layer = netpipe(out / f"np-bw-{mpi}-layer.out")
        if not plain or not layer:
            continue
        print(f"## NetPIPE sweep, {mpi}, wan-2site (Mbit/s; one-way us)\n")
        print("| bytes | without Mbit/s | with Mbit/s | ratio | without us | with us |")
        print("|---:|---:|---:|---:|---:|---:|")
        for n in sorted(set(plain) & set(layer)):
            if n < 1024 or (n & (n - 1) and n < 65536):
                continue
            p, q = plain[n], layer[n]
            print(f"| {n:,} | {fmt(p[0])} | {fmt(q[0])} | {q[0] / p[0]:.2f}x ", end="")
            print(f"| {fmt(p[1], 0)} | {fmt(q[1], 0)} |")
        for mode in ("plain", "layer"):
            w = wan(out / f"np-bw-{mpi}-{mode}.wan")
            if w is None:
                continue
            print(
                f"\n{mode}: delay line forwarded {w[0]:,} B, drops {w[1]}; "
                f"exit {exit_code(out, f'np-bw-{mpi}-{mode}')}",
                end="",
            )
            if mode != "plain":
                last = max(layer or {0: (0, 0)})
                print(
                    f"; last size done {last:,}; " + stats_line(out / f"np-bw-{mpi}-{mode}.log"),
                    end="",
                )
        print("\n")
    # 1b. exactly 10 MiB
    for mpi in mpis:
        runs = {"plain": [], "layer": []}
        for mode, rates in runs.items():
            for f in sorted(out.glob(f"np-10m-{mpi}-{mode}-*.out")):
                r = netpipe(f)
                if 10485760 in r:
                    rates.append(r[10485760][0])
        if not runs["plain"] or not runs["layer"]:
            continue
        mp, ml = statistics.median(runs["plain"]), statistics.median(runs["layer"])
        print(
            f"## NetPIPE at 10 MiB, {mpi}: without {fmt(mp)} Mbit/s "
            f"({', '.join(fmt(x) for x in runs['plain'])}), with {fmt(ml)} "
            f"({', '.join(fmt(x) for x in runs['layer'])}); gain {ml / mp:.2f}x (medians)"
        )
        for f in sorted(out.glob(f"np-10m-{mpi}-*.wan")):
            w = wan(f)
            extra = "; " + stats_line(f.with_suffix(".log")) if "-layer-" in f.name else ""
            print(
                f"- {f.stem}: exit {exit_code(out, f.stem)}; "
                f"delay line {w[0]:,} B, drops {w[1]}{extra}"
            )
        print()
    # stripe
    for mpi in mpis:
        res = {}
        for lanes in ("stock", "tcp8"):
            f = out / f"stripe-{mpi}-{lanes}.json"
            if f.exists():
                d = json.loads(f.read_text())
                row = d["rows"][0]
                res[lanes] = (
                    row["bytes"] * 8 / row["time_us"],
                    row["bw_Mbps"],
                    d["status"],
                    d["provenance"].get("testbed", {}),
                )
        if len(res) == 2:
            s, t = res["stock"], res["tcp8"]
            print(
                f"## bench stripe 10M, {mpi}: ping-pong {fmt(s[0])} -> {fmt(t[0])} Mbit/s "
                f"(gain {t[0] / s[0]:.2f}x); stream {fmt(s[1])} -> {fmt(t[1])} "
                f"(gain {t[1] / s[1]:.2f}x); status {s[2]}/{t[2]}; "
                f"wan bytes {s[3].get('wan_tx_bytes')}/{t[3].get('wan_tx_bytes')}\n"
            )
    # 2. latency
    for where in ("wan", "local"):
        for mpi in mpis:
            files = sorted(out.glob(f"np-lat-{where}-{mpi}-*-*.out"))
            if not files:
                continue
            reps = sorted({int(f.stem.rsplit("-", 1)[1]) for f in files})
            data = {
                m: [netpipe(out / f"np-lat-{where}-{mpi}-{m}-{r}.out") for r in reps]
                for m in ("plain", "layer")
            }
            sizes = [1, 8, 64, 256, 1024]
            print(
                f"## NetPIPE latency, {mpi}, {where} "
                "(one-way us, runs in order; ratio of medians)\n"
            )
            print("| bytes | without (runs) | with (runs) | with / without: medians | minima |")
            print("|---:|---|---|---:|---:|")
            for n in sizes:
                p = [d[n][1] for d in data["plain"] if n in d]
                l_ = [d[n][1] for d in data["layer"] if n in d]
                if not p or not l_:
                    continue
                nd = 0 if where == "wan" else 3
                print(
                    f"| {n} | {', '.join(fmt(x, nd) for x in p)} "
                    f"| {', '.join(fmt(x, nd) for x in l_)} | "
                    f"{statistics.median(l_) / statistics.median(p):.3f} | "
                    f"{min(l_) / min(p):.3f} |"
                )
            allr = []
            for n in sorted(set.intersection(*[set(d) for d in data["plain"] + data["layer"]])):
                allr.append(
                    (
                        statistics.median([d[n][1] for d in data["layer"]])
                        / statistics.median([d[n][1] for d in data["plain"]]),
                        n,
                    )
                )
            if allr:
                print(
                    f"\nover all {len(allr)} sizes 1..1024: "
                    f"ratio of medians {min(allr)[0]:.3f} ({min(allr)[1]} B) .. "
                    f"{max(allr)[0]:.3f} ({max(allr)[1]} B), "
                    f"median {statistics.median(r for r, _ in allr):.3f}"
                )
                # the best run per size: the layer's own cost, without the machine's
                # bimodal moments (2 shared cores: runs land 2-4x apart locally)
                best = [
                    min(d[n][1] for d in data["layer"]) / min(d[n][1] for d in data["plain"])
                    for _, n in allr
                ]
                print(
                    f"ratio of minima over the runs: {min(best):.3f} .. {max(best):.3f}, "
                    f"median {statistics.median(best):.3f}"
                )
            # plain vs plain spread: the noise
            if len(reps) > 1:
                sp = []
                for n in sizes:
                    p = [d[n][1] for d in data["plain"] if n in d]
                    if p:
                        sp.append(max(p) / min(p))
                print(f"noise: without-runs max/min per size up to {max(sp):.3f}")
            print()
    # 3. matmul
    mm = sorted(out.glob("mm-*.json"))
    if mm:
        print("## mln-matmul on wan-2site (s; median of the program's 3 repetitions, per run)\n")
        print(
            "| MPI | ranks/site | layer | run | N | total | bcast B | scatter A | dgemm "
            "| gather C | layer stats |"
        )
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
        groups: dict[tuple[str, str, str], list[dict]] = {}
        for f in mm:
            _, mpi, ppn, mode, rep = f.stem.split("-")
            d = json.loads(f.read_text())
            for row in d["rows"]:
                groups.setdefault((mpi, ppn, mode), []).append(row)
                st = stats_line(f.with_suffix(".log")) if mode == "layer" else ""
                print(
                    f"| {mpi} | {ppn[3:]} | {mode} | {rep} | {row['n']} | {row['total_s']:.2f} "
                    f"| {row['bcast_s']:.2f} | {row['scatter_s']:.2f} | {row['dgemm_s']:.2f} "
                    f"| {row['gather_s']:.2f} | {st} |"
                )
        print("\n| MPI | ranks/site | phase | without (median of runs) | with | with / without |")
        print("|---|---:|---|---:|---:|---:|")
        for (mpi, ppn, mode), rows in sorted(groups.items()):
            if mode != "plain" or (mpi, ppn, "layer") not in groups:
                continue
            lrows = groups[(mpi, ppn, "layer")]
            for ph in ("total_s", "bcast_s", "scatter_s", "gather_s"):
                p = statistics.median(r[ph] for r in rows)
                l_ = statistics.median(r[ph] for r in lrows)
                print(f"| {mpi} | {ppn[3:]} | {ph[:-2]} | {p:.2f} | {l_:.2f} | {l_ / p:.2f} |")
        print()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
