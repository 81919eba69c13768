"""How `bench` and `run` choose rank counts: the defaults, and the helper ranks that stripe's
helper:K lanes need on every host (no MPI, no root: pure functions and the fake tree)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from multilane.bench import BenchRequest, prepare, resolve_ranks
from multilane.context import Context
from multilane.errors import UsageError

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
