"""How `bench` and `run` choose rank counts (the defaults, and the helper ranks that stripe's
helper:K lanes need on every host), pass stripe's link security to the ranks, and record a
run's CPU time (no MPI, no root: pure functions and the fake tree)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from multilane.bench import BenchRequest, cpu_record, prepare, resolve_ranks
from multilane.benchmarks import get_benchmark
from multilane.context import Context
from multilane.errors import UsageError
from multilane.runner import RunResult

TESTBED = Path("scenarios/wan-2site.toml")


def _stripe(lanes: str | None = None, **kw: object) -> BenchRequest:
    options = {} if lanes is None else {"lanes": lanes}
    return BenchRequest(benchmark="stripe", mpi="openmpi", options=options, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("request_", "np", "ppn", "note"),
    [
        (BenchRequest("pt2pt"), 2, None, ""),
        (BenchRequest("pt2pt", np=6), 6, None, ""),
        (_stripe(), 2, None, ""),
        (_stripe("tcp:16"), 2, None, ""),
        (
            _stripe("helper:1"),
            3,
            None,
            "lanes helper:1: 3 ranks (a benchmark pair + 1 helper rank)",
        ),
        (_stripe("helper:2", np=4), 4, None, "lanes helper:2: 4 ranks"),
        (BenchRequest("pt2pt", scenario=TESTBED), None, 1, ""),
        (BenchRequest("pt2pt", scenario=TESTBED, ppn=4), None, 4, ""),
        (_stripe("tcp:8", scenario=TESTBED), None, 1, ""),
        (
            _stripe("helper:2", scenario=TESTBED),
            None,
            3,
            "lanes helper:2: 3 ranks per host (1 benchmark rank + 2 helper ranks the library "
            "takes from the end of each host's ranks)",
        ),
        (_stripe("helper:16", scenario=TESTBED, ppn=17), None, 17, "lanes helper:16: 17 ranks"),
    ],
)
def test_resolve_ranks(request_: BenchRequest, np: int | None, ppn: int | None, note: str) -> None:
    resolved, said = resolve_ranks(request_)
    assert (resolved.np, resolved.ppn) == (np, ppn)
    assert said.startswith(note) if note else said == ""
    assert resolve_ranks(resolved) == (resolved, said)  # idempotent: scenarios resolve early


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            _stripe("helper:2", np=2),
            "lanes helper:2 needs 4 ranks on one host (a benchmark pair + 2 helper ranks), "
            "got np 2: leave np out, it is set for you",
        ),
        (
            _stripe("helper:1", scenario=TESTBED, ppn=1),
            "lanes helper:1 needs 2 ranks per host (1 benchmark rank + 1 helper rank), "
            "got ppn 1: leave ppn out, it is set for you",
        ),
        (_stripe("helper:0"), "lanes: invalid lanes 'helper:0'"),
    ],
)
def test_resolve_ranks_conflicts(request_: BenchRequest, message: str) -> None:
    with pytest.raises(UsageError) as info:
        resolve_ranks(request_)
    assert str(info.value) == message or str(info.value).startswith(message)


def _ctx(root: Path) -> Context:
    return Context(root=root, env={"PATH": "/usr/bin:/bin"}, ncpus=2, euid=1000)


def test_prepare_helper_run_locally(fake_root: Path, tmp_path: Path) -> None:
    request = replace(_stripe(), options={"lanes": "helper:2", "sizes": "1K"})
    prepared = prepare(request, _ctx(fake_root), tmp_path)
    argv = list(prepared.launch.argv)
    assert prepared.request.np == 4
    assert argv[argv.index("-np") + 1] == "4"
    assert "--oversubscribe" in argv  # 4 ranks on 2 cores: Open MPI yields when idle
    assert argv[argv.index("mpi_yield_when_idle") + 1] == "1"
    assert argv[argv.index("--lanes") + 1] == "helper:2"
    assert "lanes=helper:2" in argv and "np=4" in argv  # --meta values
    assert prepared.label == "openmpi-helper:2-shm"
    assert prepared.json_path.name == "openmpi-helper_2-shm.json"
    assert prepared.note == "lanes helper:2: 4 ranks (a benchmark pair + 2 helper ranks)"


def test_prepare_stripe_without_helpers(fake_root: Path, tmp_path: Path) -> None:
    prepared = prepare(_stripe("tcp:8"), _ctx(fake_root), tmp_path)
    argv = list(prepared.launch.argv)
    assert argv[argv.index("-np") + 1] == "2" and "--oversubscribe" not in argv
    assert prepared.note == ""
    with pytest.raises(UsageError, match="unknown option 'lanes' for pt2pt"):
        prepare(BenchRequest("pt2pt", options={"lanes": "tcp:8"}), _ctx(fake_root), tmp_path)


# ---- stripe's link security: the ranks' environment, the label, meta.link_security -------


# (--security, the caller's environment, label, meta.link_security, the ranks' MLN_* added)
SECURITY_CASES = [
    (None, {}, "openmpi-tcp:8-shm", "auth", {}),  # the library's default
    (None, {"MLN_LINK_SECURITY": "aead"}, "openmpi-tcp:8-shm", "aead", {}),  # the caller's
    (
        "none",
        {"MLN_LINK_PAYLOAD_MAC": "1"},
        "openmpi-tcp:8-none-shm",
        "none",
        {"MLN_LINK_SECURITY": "none", "MLN_LINK_PAYLOAD_MAC": "0"},
    ),
    (
        "auth+mac",
        {},
        "openmpi-tcp:8-auth+mac-shm",
        "auth+mac",
        {"MLN_LINK_SECURITY": "auth", "MLN_LINK_PAYLOAD_MAC": "1"},
    ),
]


@pytest.mark.parametrize("case", SECURITY_CASES)
def test_prepare_security(fake_root: Path, tmp_path: Path, case: tuple[object, ...]) -> None:
    """--security reaches the ranks as MLN_LINK_* in the launch's environment (not as a
    program argument); every stripe result records the mode it ran in (meta.link_security)."""
    security, caller, label, recorded, env = case
    assert isinstance(caller, dict) and isinstance(env, dict)
    options = {"lanes": "tcp:8", **({"security": security} if security else {})}
    ctx = Context(root=fake_root, env={"PATH": "/usr/bin:/bin", **caller}, ncpus=2, euid=1000)
    prepared = prepare(replace(_stripe(), options=options), ctx, tmp_path)
    argv = list(prepared.launch.argv)
    assert "--security" not in argv and f"link_security={recorded}" in argv  # a --meta value
    assert prepared.label == label
    assert {k: v for k, v in prepared.launch.env.items() if k.startswith("MLN_")} == env
    assert prepared.request.env == env
    if env:
        assert "MLN_LINK_SECURITY=" in prepared.describe()


def test_prepare_security_conflicts_with_env(fake_root: Path, tmp_path: Path) -> None:
    request = replace(
        _stripe(), options={"lanes": "tcp:8", "security": "aead"}, env={"MLN_LINK_SECURITY": "none"}
    )
    with pytest.raises(UsageError) as info:
        prepare(request, _ctx(fake_root), tmp_path)
    assert str(info.value) == (
        "env sets MLN_LINK_SECURITY=none, security = 'aead' sets MLN_LINK_SECURITY=aead: "
        "give one of them"
    )
    same = replace(request, env={"MLN_LINK_SECURITY": "aead", "MLN_LOG": "info"})
    prepared = prepare(same, _ctx(fake_root), tmp_path)
    assert prepared.launch.env["MLN_LOG"] == "info"


def test_no_link_security_for_other_benchmarks(fake_root: Path, tmp_path: Path) -> None:
    argv = prepare(BenchRequest("pt2pt"), _ctx(fake_root), tmp_path).launch.argv
    assert not any(a.startswith("link_security=") for a in argv)


# ---- CPU time per GB: provenance.cpu -------------------------------------------------------


def _stripe_doc(warmup: object) -> dict[str, object]:
    rows = [
        {"bytes": 1 << 20, "iters": 20, "window": 4, "time_us": 9.0, "bw_Mbps": 5.0},
        {"bytes": 10 << 20, "iters": 1, "window": 6, "time_us": 9.0, "bw_Mbps": 5.0},
    ]
    return {
        "provenance": {"params": {"reps": 3, "pairs": 1, "warmup": warmup}},
        "metrics": [{"name": "time_us"}, {"name": "bw_Mbps"}],
        "rows": rows,
    }


@pytest.mark.parametrize(
    ("warmup", "warm"),
    [(1, (1, 1)), ("2", (2, 2)), ("auto", (2, 1))],  # auto: max(1, iters / 10) per repetition
)
def test_cpu_record(fake_root: Path, tmp_path: Path, warmup: object, warm: tuple[int, int]):
    """CPU seconds per GB = (user + system) / the payload of every timed and warm-up
    iteration: ping-pong 2 messages, stream a window, per repetition."""
    prepared = prepare(_stripe("tcp:8"), _ctx(fake_root), tmp_path)
    result = RunResult(0, False, 10.0, tmp_path / "x.log", "", 1.5, 0.5)
    record = cpu_record(prepared, _stripe_doc(warmup), result)
    moved = 3 * ((1 << 20) * (20 + warm[0]) * (2 + 4) + (10 << 20) * (1 + warm[1]) * (2 + 6))
    assert record["payload_bytes"] == moved
    assert (record["user_s"], record["sys_s"], record["cpu_s"]) == (1.5, 0.5, 2.0)
    assert record["cpu_s_per_gb"] == round(2.0 / (moved / 1e9), 4)
    assert "whole run" in record["scope"]


def test_cpu_record_without_payload(fake_root: Path, tmp_path: Path) -> None:
    """A benchmark without a payload table (matmul) or a result that moved nothing: the CPU
    seconds, no per-GB figure."""
    prepared = prepare(_stripe("tcp:8"), _ctx(fake_root), tmp_path)
    doc = {**_stripe_doc(1), "rows": []}
    record = cpu_record(prepared, doc, RunResult(0, False, 1.0, tmp_path / "x", "", 0.25, 0.0))
    assert record["cpu_s"] == 0.25 and "cpu_s_per_gb" not in record
    matmul = replace(prepared, benchmark=get_benchmark("matmul"))
    record = cpu_record(matmul, _stripe_doc(1), RunResult(0, False, 1.0, tmp_path / "x", "", 1, 0))
    assert "cpu_s_per_gb" not in record and "payload_bytes" not in record
