"""The CLI as a user meets it: one-line errors with exit 2 before anything runs, and the
bench / run / report / validate flow on a fake MPI tree (see conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FAKE_STRIPE, clean_env, multilane


def _one_line_error(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("multilane: error: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--sizes", "abc"], "invalid size spec 'abc'"),
        (["--sizes", "8:1"], "lower bound is above the upper bound"),
        (["--np", "0"], "argument --np: expected a positive integer, got '0'"),
        (["--np", "-3"], "expected a positive integer, got '-3'"),
        (["--np", "1.5"], "expected a positive integer, got '1.5'"),
        (["--np", "two"], "expected a positive integer"),
        (["--reps", "0"], "argument --reps"),
        (["--timeout", "-1"], "argument --timeout"),
        (["--transport", "udp"], "invalid choice: 'udp'"),
        (["--mpi", "foo"], "unknown MPI 'foo' (available: openmpi"),  # + deb-* where installed
        (["--mpi", "mpich"], "MPI 'mpich' is not installed: run make deps"),
        (["--mpi", "user"], "set MPI_HOME"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bench_bad_input(fake_root: Path, args: list[str], fragment: str) -> None:
    proc = multilane(["bench", "pt2pt", *args], clean_env(fake_root))
    _one_line_error(proc, fragment)
    assert not (fake_root / "results").exists()


def test_unknown_benchmark(fake_root: Path) -> None:
    proc = multilane(["bench", "nope"], clean_env(fake_root))
    _one_line_error(
        proc,
        "unknown benchmark 'nope' (known: pt2pt, stripe, bcast, halo, matmul, gpu-transfer, relay, "
        "nas-is, nas-mg, nas-lu)",
    )


def test_invalid_tunable_is_refused_before_launch(fake_root: Path) -> None:
    proc = multilane(["bench", "pt2pt"], clean_env(fake_root, MLN_LOG="loud"))
    _one_line_error(proc, "MLN_LOG: invalid value 'loud' (expected one of: none, error")
    assert not (fake_root / "results").exists()


def test_not_built(fake_root: Path) -> None:
    (fake_root / "build" / "openmpi" / "bin" / "mln-pt2pt").unlink()
    proc = multilane(["bench", "pt2pt", "--mpi", "openmpi"], clean_env(fake_root))
    _one_line_error(proc, "mln-pt2pt is not built for openmpi")
    assert "run make build" in proc.stderr


def test_no_subcommand_and_extra_args_elsewhere(fake_root: Path) -> None:
    _one_line_error(multilane([], clean_env(fake_root)), "required")
    proc = multilane(["mpi", "list", "--", "x"], clean_env(fake_root))
    _one_line_error(proc, "only")


def test_bench_flow(fake_root: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy" / "r.json"
    proc = multilane(
        ["bench", "pt2pt", "--sizes", "1,2,4,8", "--reps", "2", "--transport", "tcp",
         "--json", str(copy)],
        clean_env(fake_root),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    # progress: header lines, then rows with a prefix, then the verdict; no provenance block
    assert "[openmpi/tcp] #       bytes  iters  errors  latency_us" in out
    assert "[openmpi/tcp]             8     10       0        9.00" in out
    assert "[openmpi/tcp] # verdict: PASS" in out
    assert "(fake)" not in out
    folders = list((fake_root / "results").iterdir())
    assert len(folders) == 1 and folders[0].name.endswith("-pt2pt")
    result = folders[0] / "openmpi-tcp.json"
    assert f"result: {result}" in out
    assert (folders[0] / "openmpi-tcp.log").read_text().startswith("# multilane pt2pt (fake)")
    doc = json.loads(result.read_text())
    meta = doc["provenance"]["meta"]
    assert meta == {"mpi": "openmpi", "transport": "tcp", "np": "2", "label": "openmpi-tcp"}
    launch = doc["provenance"]["launch"]
    assert launch["argv"][:3] == [str(fake_root / ".deps/openmpi/bin/mpirun"), "-np", "2"]
    assert "btl_tcp_if_include" in launch["argv"]
    assert launch["argv"][launch["argv"].index("--sizes") + 1] == "1,2,4,8"
    expected_env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert launch["env"] == (expected_env if os.geteuid() == 0 else {})
    assert json.loads(copy.read_text()) == doc


def test_bench_data_errors_fail(fake_root: Path, tmp_path: Path) -> None:
    results = tmp_path / "res"
    proc = multilane(
        ["bench", "pt2pt", "--sizes", "1,2", "--label", "my run", "--results", str(results),
         "--", "--inject-error", "2"],
        clean_env(fake_root),
    )  # fmt: skip
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert "my run: mln-pt2pt exited with status 1 (wrong data, verdict FAIL)" in lines[0]
    stored = next(results.iterdir()) / "my_run.json"
    assert json.loads(stored.read_text())["status"] == "fail"


def test_bench_program_usage_error_is_shown(fake_root: Path) -> None:
    proc = multilane(["bench", "pt2pt", "--", "--frobnicate"], clean_env(fake_root))
    assert proc.returncode == 1
    assert "status 2 (usage or start-up error): mln-pt2pt: error: unknown option" in proc.stderr


def test_bench_timeout(fake_root: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    env = clean_env(fake_root, FAKE_SLEEP="300", FAKE_PIDFILE=str(pidfile))
    start = time.monotonic()
    proc = multilane(["bench", "pt2pt", "--timeout", "2"], env)
    assert time.monotonic() - start < 30
    assert proc.returncode == 1
    assert "timed out after 2 s" in proc.stderr
    grandchild = int(pidfile.read_text())
    time.sleep(0.5)
    assert (
        not Path(f"/proc/{grandchild}").exists()
        or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split()[2]
    )


def _scenario(root: Path, body: str) -> Path:
    path = root / "scenarios" / "t.toml"
    path.write_text(body)
    return path


def test_run_scenario_and_report(fake_root: Path) -> None:
    path = _scenario(
        fake_root,
        'name = "demo"\n[defaults]\nsizes = "1,2,4"\n'
        '[matrix]\nmpi = ["openmpi"]\ntransport = ["shm", "tcp"]\n',
    )
    proc = multilane(["run", str(path)], clean_env(fake_root))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "(1/2) openmpi shm pt2pt np=2 [openmpi-shm] ..." in out
    assert "(2/2) openmpi tcp pt2pt np=2 [openmpi-tcp] ..." in out
    assert "(2/2 openmpi/tcp) # verdict: PASS" in out
    folder = next((fake_root / "results").iterdir())
    assert folder.name.endswith("-demo")
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "openmpi-shm.json", "openmpi-shm.log", "openmpi-tcp.json", "openmpi-tcp.log",
        "pt2pt-latency_us.png", "pt2pt-summary.png", "report.md", "scenario.toml",
    ]  # fmt: skip
    assert f"report: {folder / 'report.md'}" in out
    assert "| bytes | openmpi-shm | openmpi-tcp |" in out
    doc = json.loads((folder / "openmpi-tcp.json").read_text())
    assert doc["provenance"]["meta"]["scenario"] == "demo"
    # report again, elsewhere, from the stored JSON only
    again = multilane(["report", str(folder), "--out", str(folder / "again")], clean_env())
    assert again.returncode == 0, again.stderr
    assert (folder / "again" / "report.md").exists()


def test_run_missing_mpi_fails_up_front(fake_root: Path) -> None:
    path = _scenario(fake_root, '[matrix]\nmpi = ["openmpi", "mpich"]\n')
    proc = multilane(["run", str(path)], clean_env(fake_root))
    _one_line_error(proc, "MPI 'mpich' is not installed: run make deps")
    assert not (fake_root / "results").exists()


def test_run_invalid_scenario(fake_root: Path) -> None:
    path = _scenario(fake_root, '[[run]]\nmpi = "openmpi"\nnp = "two"\n')
    proc = multilane(["run", str(path)], clean_env(fake_root))
    _one_line_error(proc, f"{path}: run[0].np: expected a positive integer")


def test_run_dry_run(fake_root: Path) -> None:
    path = _scenario(fake_root, '[[run]]\nmpi = "openmpi"\ntransport = "tcp"\nlabel = "x"\n')
    proc = multilane(["run", str(path), "--dry-run"], clean_env(fake_root))
    assert proc.returncode == 0, proc.stderr
    assert "(1/1) x: " in proc.stdout and "btl_tcp_if_include lo" in proc.stdout
    assert not (fake_root / "results").exists()


def test_validate(fixtures: Path) -> None:
    good = multilane(["validate", str(fixtures / "minimal-good.json")], clean_env())
    assert good.returncode == 0 and "ok (pt2pt, status pass, 2 rows)" in good.stdout
    bad = multilane(
        ["validate", str(fixtures / "minimal-good.json"), str(fixtures / "bad-wrong-type.json")],
        clean_env(),
    )
    assert bad.returncode == 1
    assert "bad-wrong-type.json: invalid result: provenance/nranks" in bad.stderr


def test_report_errors(tmp_path: Path) -> None:
    proc = multilane(["report", str(tmp_path)], clean_env())
    assert proc.returncode == 1
    assert proc.stderr.startswith("multilane: error: ") and "no multilane result" in proc.stderr


def test_mpi_list(fake_root: Path) -> None:
    proc = multilane(["mpi", "list"], clean_env(fake_root))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["name", "flavour", "version", "CUDA-aware", "built", "prefix"]
    assert lines[1].split() == ["openmpi", "openmpi", "9.9.9", "no", "yes", ".deps/openmpi"]
    assert "not installed: run make deps" in lines[2]
    listing = json.loads(multilane(["mpi", "list", "--json"], clean_env(fake_root)).stdout)
    assert [m["name"] for m in listing] == ["openmpi", "mpich", "user", "deb-openmpi", "deb-mpich"]
    assert listing[0]["cuda_aware"] == "no" and listing[0]["built"] is True


def test_config(fake_root: Path) -> None:
    proc = multilane(["config", "--json"], clean_env(fake_root, MLN_LOG="debug"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["value"] == "debug"
    (fake_root / "build" / "openmpi" / "bin" / "mln-config").unlink()
    _one_line_error(multilane(["config"], clean_env(fake_root)), "run make build")


TESTBED = "scenarios/wan-2site.toml"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["stripe", "--lanes", "tcp:0"], "argument --lanes: invalid lanes 'tcp:0' (expected stock"),
        (["stripe", "--lanes", "helper:17"], "at most 16 helper ranks per host"),
        (["pt2pt", "--lanes", "tcp:4"], "unknown option 'lanes' for pt2pt (known: sizes"),
        (
            ["stripe", "--lanes", "helper:2", "--np", "2"],
            "lanes helper:2 needs 4 ranks on one host (a benchmark pair + 2 helper ranks), "
            "got np 2: leave np out",
        ),
        (
            ["stripe", "--scenario", TESTBED, "--lanes", "helper:2", "--ppn", "2"],
            "lanes helper:2 needs 3 ranks per host (1 benchmark rank + 2 helper ranks), got ppn 2",
        ),
    ],
)
def test_bench_lanes_bad_input(fake_root: Path, args: list[str], fragment: str) -> None:
    """Refused before anything starts: no test bed is brought up, no folder made."""
    _one_line_error(multilane(["bench", *args], clean_env(fake_root)), fragment)
    assert not (fake_root / "results").exists()


def test_bench_stripe_flow(fake_root: Path, tmp_path: Path) -> None:
    copy = tmp_path / "s.json"
    args = ["stripe", "--lanes", "helper:1", "--sizes", "1K,1M", "--json", str(copy)]
    proc = multilane(
        ["bench", *args, "--", "--local", "1"],
        clean_env(fake_root),
    )
    assert proc.returncode == 0, proc.stderr
    assert "multilane: stripe on openmpi/shm, 3 ranks" in proc.stdout
    assert "multilane: lanes helper:1: 3 ranks (a benchmark pair + 1 helper rank)" in proc.stdout
    doc = json.loads(copy.read_text())
    assert doc["provenance"]["meta"]["lanes"] == "helper:1"
    assert doc["provenance"]["meta"]["label"] == "openmpi-helper:1-shm"
    assert doc["provenance"]["meta"]["link_security"] == "auth"  # the library's default
    assert "MLN_LINK_SECURITY" not in doc["provenance"]["launch"]["env"]  # not set: default
    assert doc["provenance"]["params"]["local"] == "1"
    assert "-np 3" in " ".join(doc["provenance"]["launch"]["argv"])


def test_run_stripe_scenario(fake_root: Path) -> None:
    path = _scenario(
        fake_root,
        'name = "lanes"\n[defaults]\nbenchmark = "stripe"\nsizes = "1K,1M,10M"\nlocal = 1\n'
        '[matrix]\nmpi = ["openmpi"]\nlanes = ["stock", "tcp:8", "helper:2"]\n',
    )
    dry = multilane(["run", str(path), "--dry-run"], clean_env(fake_root))
    assert dry.returncode == 0, dry.stderr
    assert "(3/3) openmpi-helper:2 [lanes helper:2: 4 ranks (a benchmark pair + 2 helper " in (
        dry.stdout
    )
    assert "-np 4" in dry.stdout and "--lanes helper:2" in dry.stdout
    assert not (fake_root / "results").exists()
    proc = multilane(["run", str(path)], clean_env(fake_root))
    assert proc.returncode == 0, proc.stderr
    assert "(3/3) openmpi tcp stripe np=4" not in proc.stdout  # local runs: shm by default
    assert "(3/3) openmpi shm stripe np=4 [openmpi-helper:2] (lanes helper:2: 4 ranks" in (
        proc.stdout
    )
    assert "(scenario elapsed " in proc.stdout
    folder = next((fake_root / "results").iterdir())
    names = sorted(p.name for p in folder.glob("*.json"))
    assert names == ["openmpi-helper_2.json", "openmpi-stock.json", "openmpi-tcp_8.json"]
    assert (folder / "stripe-bandwidth.png").exists() and (folder / "stripe-lanes.png").exists()
    md = (folder / "report.md").read_text()
    assert "best tcp:N / stock" in md and "8.00x" in md  # the fake streams 8x stock


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ["stripe", "--security", "tls"],
            "argument --security: invalid security mode 'tls' (expected auth, auth+mac, aead "
            "or none)",
        ),
        (["stripe", "--security", "auth,aead,auth"], "security mode auth is given twice"),
        (["pt2pt", "--security", "aead"], "unknown option 'security' for pt2pt (known: sizes"),
        (
            ["stripe", "--security", "none,aead", "--json", "x.json"],
            "--json copies one result: give one --security mode with it",
        ),
        (
            ["exec", "--security", "aead", "--", "true"],
            "bench exec times a whole program: --security does not apply",
        ),
    ],
)
def test_bench_security_bad_input(fake_root: Path, args: list[str], fragment: str) -> None:
    _one_line_error(multilane(["bench", *args], clean_env(fake_root)), fragment)
    assert not (fake_root / "results").exists()


def test_bench_help_names_security() -> None:
    proc = multilane(["bench", "--help"], clean_env())
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "--security MODE[,MODE...] stripe: link security of the tcp lanes: auth" in text
    assert "default: auth (the library's); several: one run each" in text


def test_bench_stripe_security_flow(fake_root: Path) -> None:
    """--security none,auth,aead: one run per mode into one folder, the mode in each label,
    in the ranks' environment (the fake streams slower as the mode protects more) and in
    meta.link_security; the CPU time in provenance.cpu; then the report, modes side by side."""
    fake = FAKE_STRIPE.replace("import json, sys", "import json, os, sys").replace(
        "t, bw = 5000.0 + b / (16.0 * fast), 100.0 * fast",
        "t, bw = 5000.0 + b / (16.0 * fast), 100.0 * fast * "
        '{"none": 1.0, "auth": 0.99, "aead": 0.95}[os.environ["MLN_LINK_SECURITY"]]',
    )
    program = fake_root / "build" / "openmpi" / "bin" / "mln-stripe"
    program.write_text(f"#!{sys.executable}\n{fake}")
    args = ["stripe", "--lanes", "tcp:8", "--security", "none,auth,aead", "--sizes", "1M,10M"]
    proc = multilane(["bench", *args, "--", "--local", "1"], clean_env(fake_root))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("multilane: stripe on openmpi/shm, 2 ranks") == 3
    assert "(3/3 openmpi/shm) # verdict: PASS" in out
    folder = next((fake_root / "results").iterdir())
    names = sorted(p.name for p in folder.glob("*.json"))
    modes = ("none", "auth", "aead")
    assert names == sorted(f"openmpi-tcp_8-{m}-shm.json" for m in modes)
    for mode in modes:
        doc = json.loads((folder / f"openmpi-tcp_8-{mode}-shm.json").read_text())
        prov = doc["provenance"]
        assert prov["meta"]["link_security"] == mode
        assert prov["meta"]["label"] == f"openmpi-tcp:8-{mode}-shm"
        assert prov["launch"]["env"]["MLN_LINK_SECURITY"] == mode
        assert prov["cpu"]["cpu_s"] >= 0 and prov["cpu"]["payload_bytes"] > 0
        assert "cpu_s_per_gb" in prov["cpu"]
        assert 0 <= prov["host"]["steal_pct"] <= 100 and "steal" in prov["host"]["scope"]
    assert "stripe: link security" in out  # the report, printed
    md = (folder / "report.md").read_text()
    assert "| auth / none" in md and "0.990x" in md and "0.950x" in md
    assert "openmpi tcp:8 streams at 10M [Mbit/s]: none 800; auth 792 (0.990x none); " in md


# ---- the broadcast's options on the command line; testbed check --streams -----------------

BCAST_TESTBED = "scenarios/bcast-2site.toml"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["bcast", "--algo", "fast"], "argument --algo: expected one of stock, mpi, sme, hier"),
        (["bcast", "--leaders", "-1"], "argument --leaders: expected leaders per node from 1 to"),
        (["bcast", "--leaders", "two"], "argument --leaders: expected leaders per node"),
        (["bcast", "--leaders", "1025"], "from 1 to 1024 (0: the default), got 1025"),
        (["bcast", "--root", "-1"], "argument --root: expected an integer >= 0, got -1"),
        (["bcast", "--root", "1.5"], "argument --root: expected an integer >= 0, got '1.5'"),
        (["pt2pt", "--algo", "sme"], "unknown option 'algo' for pt2pt (known: sizes"),
        (["stripe", "--leaders", "2"], "unknown option 'leaders' for stripe (known: lanes"),
        (["pt2pt", "--root", "0"], "unknown option 'root' for pt2pt"),
        (["bcast", "--lanes", "tcp:4"], "unknown option 'lanes' for bcast (known: algo, leaders"),
        (
            ["bcast", "--scenario", BCAST_TESTBED, "--np", "8"],
            "with --scenario the ranks go to every host over the emulated network: leave out "
            "--transport and --np",
        ),
        (
            ["pt2pt", "--scenario", BCAST_TESTBED, "--transport", "shm"],
            "with --scenario the ranks go one host per site over the emulated network",
        ),
    ],
)
def test_bench_bcast_bad_input(fake_root: Path, args: list[str], fragment: str) -> None:
    """Refused before anything starts: no test bed is brought up, no folder made."""
    _one_line_error(multilane(["bench", *args], clean_env(fake_root)), fragment)
    assert not (fake_root / "results").exists()


def test_bench_help_names_bcast_options() -> None:
    proc = multilane(["bench", "--help"], clean_env())
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "--algo NAME bcast: stock, mpi, sme, hier or auto" in text
    assert "--leaders L bcast: sme: leaders per node L (0: default)" in text
    assert "--root R bcast: the broadcasting rank" in text
    assert "one host per site (bcast, halo, nas-is, nas-mg, nas-lu: every host)" in text


def test_bench_bcast_flow(fake_root: Path, tmp_path: Path) -> None:
    """--algo, --leaders and --root reach the program as its own options."""
    fake = FAKE_STRIPE.replace(
        '"--window-bytes")', '"--window-bytes", "--algo", "--leaders", "--root")'
    )
    fake = fake.replace('"benchmark": "stripe"', '"benchmark": "bcast"')
    program = fake_root / "build" / "openmpi" / "bin" / "mln-bcast"
    program.write_text(f"#!{sys.executable}\n{fake}")
    program.chmod(0o755)
    copy = tmp_path / "b.json"
    args = ["bcast", "--algo", "hier", "--leaders", "2", "--root", "1", "--np", "4"]
    proc = multilane(["bench", *args, "--json", str(copy)], clean_env(fake_root))
    assert proc.returncode == 0, proc.stderr
    assert "multilane: bcast on openmpi/shm, 4 ranks" in proc.stdout
    doc = json.loads(copy.read_text())
    params = doc["provenance"]["params"]
    assert (params["algo"], params["leaders"], params["root"]) == ("hier", "2", "1")
    argv = doc["provenance"]["launch"]["argv"]
    assert argv[argv.index("--algo") :][:6] == ["--algo", "hier", "--leaders", "2", "--root", "1"]


@pytest.mark.parametrize(
    ("streams", "fragment"),
    [
        ("1,0", "argument --streams: expected a stream count from 1 to 64, got 0"),
        ("65", "expected a stream count from 1 to 64, got 65"),
        ("1,2,1", "argument --streams: stream count 1 is given twice (counts must differ)"),
        ("1,x", "argument --streams: expected a stream count (an integer), got 'x'"),
        ("", "expected a stream count (an integer), got ''"),
        ("1,,2", "got ''"),
    ],
)
def test_testbed_check_streams_bad_input(tmp_path: Path, streams: str, fragment: str) -> None:
    env = clean_env(MULTILANE_TESTBED_DIR=str(tmp_path))  # never a live test bed
    proc = multilane(["testbed", "check", "--streams", streams], env)
    _one_line_error(proc, fragment)


def test_testbed_check_help_names_streams() -> None:
    proc = multilane(["testbed", "check", "--help"], clean_env())
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "--streams N,N..." in text and "(distinct, 1..64; default 1,8)" in text
