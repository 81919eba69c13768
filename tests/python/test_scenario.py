"""Scenario files: expansion and validation messages (file, key, problem)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import two_sites_network
from multilane.scenario import ScenarioError, load_scenario
from multilane.sizes import parse_size_spec
from multilane.testbed.check import DEFAULT_STREAMS, streams_text
from multilane.testbed.topology import TcpSettings

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def _refused(path: Path, where: str, problem: str) -> None:
    """Loading `path` fails with one line "PATH: WHERE: ..." that contains `problem`."""
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    prefix = f"{path}: {where}: " if where else f"{path}: "
    assert message.startswith(prefix), message
    assert problem in message, message
    assert "\n" not in message


def test_demo_scenario() -> None:
    scenario = load_scenario(REPO / "scenarios" / "pt2pt-local.toml")
    assert scenario.name == "pt2pt-local"
    runs = [(r.mpi, r.transport, r.label, r.np) for r in scenario.runs]
    assert runs == [
        ("openmpi", "shm", "openmpi-shm", 2),
        ("openmpi", "tcp", "openmpi-tcp", 2),
        ("mpich", "shm", "mpich-shm", 2),
        ("mpich", "tcp", "mpich-tcp", 2),
    ]
    assert all(r.benchmark == "pt2pt" and r.options["sizes"] == "1:64M" for r in scenario.runs)
    assert all(r.meta == {"scenario": "pt2pt-local"} for r in scenario.runs)


def test_runs_and_matrix_together(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
name = "mix"
[defaults]
mpi = "openmpi"
sizes = "1:4K"
reps = 3
env = { MLN_LOG = "info" }
[matrix]
transport = ["shm", "tcp"]
np = [2, 4]
[[run]]
label = "big"
mpi = "mpich"
sizes = "1M"
args = ["--window", "8"]
timeout = 30
""",
    )
    scenario = load_scenario(path)
    labels = [r.label for r in scenario.runs]
    assert labels == ["shm-np2", "shm-np4", "tcp-np2", "tcp-np4", "big"]
    big = scenario.runs[-1]
    assert (big.mpi, big.transport, big.np, big.timeout_s) == ("mpich", "shm", 2, 30.0)
    assert big.options == {"sizes": "1M", "reps": 3}
    assert big.extra_args == ("--window", "8")
    assert big.env == {"MLN_LOG": "info"}


def test_name_defaults_to_file_stem(tmp_path: Path) -> None:
    scenario = load_scenario(_write(tmp_path, '[[run]]\nmpi = "mpich"\n'))
    assert scenario.name == "s"
    assert scenario.runs[0].label == "mpich-shm"


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("name = \n", "", "invalid TOML"),
        ("[defaults\n", "", "invalid TOML"),
        ('network = "x"\n', "network", "expected a table"),
        ('[defaults]\nnpp = 2\n[[run]]\nmpi = "mpich"\n', "defaults.npp", "unknown key"),
        ('[[run]]\nmpi = "mpich"\nhost = "a"\n', "run[0].host", "unknown key"),
        ('[[run]]\nmpi = "mpich"\nnp = "2"\n', "run[0].np", "positive integer"),
        ('[[run]]\nmpi = "mpich"\nnp = 0\n', "run[0].np", "positive integer"),
        ('[[run]]\nmpi = "mpich"\ntimeout = -1\n', "run[0].timeout", "positive number"),
        ('[[run]]\nmpi = "mpich"\nargs = "--x"\n', "run[0].args", "array of strings"),
        ('[[run]]\nmpi = "mpich"\nenv = { A = 1 }\n', "run[0].env", "table of strings"),
        ("[[run]]\nmpi = 3\n", "run[0].mpi", "non-empty string, got integer"),
        ('[[run]]\nmpi = "foo"\n', "run[0].mpi", "unknown MPI 'foo' (known: openmpi, mpich"),
        ('[[run]]\nmpi = "mpich"\ntransport = "udp"\n', "run[0].transport", "unknown transport"),
        ('[[run]]\nmpi = "mpich"\nbenchmark = "x"\n', "run[0].benchmark", "unknown benchmark"),
        ('[[run]]\nmpi = "mpich"\nsizes = "abc"\n', "run[0]", "sizes: invalid size spec"),
        ('[[run]]\nmpi = "mpich"\nreps = 0\n', "run[0]", "reps: expected a positive integer"),
        ('[[run]]\nmpi = "mpich"\ntests = "lat"\n', "run[0]", "unknown name(s) lat"),
        ("[[run]]\nnp = 2\n", "run[0]", "no MPI given"),
        ('[matrix]\nmpi = "mpich"\n', "matrix.mpi", "non-empty array"),
        ("[matrix]\nmpi = []\n", "matrix.mpi", "non-empty array"),
        ('[matrix]\nmpi = ["foo"]\n', "matrix.mpi[0]", "unknown MPI 'foo'"),
        ('[matrix]\nlabel = ["a"]\n', "matrix.label", "unknown key"),
        ('defaults = 3\n[[run]]\nmpi = "mpich"\n', "defaults", "expected a table"),
        ('name = 3\n[[run]]\nmpi = "mpich"\n', "name", "expected a string"),
        ('name = "x"\n', "", "no runs"),
        ('[[run]]\nmpi = "mpich"\n[[run]]\nmpi = "mpich"\n', "run 2", "label 'mpich-shm' repeats"),
    ],
)
def test_validation_errors(tmp_path: Path, text: str, where: str, problem: str) -> None:
    _refused(_write(tmp_path, text), where, problem)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.toml")


NETWORK = two_sites_network("100mbit", "1ms")


def test_network_scenario_runs_go_to_the_test_bed(tmp_path: Path) -> None:
    path = tmp_path / "tb.toml"
    path.write_text(
        'name = "tb"\n[defaults]\nsizes = "1:4K"\nppn = 2\n[matrix]\nmpi = ["openmpi", "mpich"]\n'
        + NETWORK
    )
    scenario = load_scenario(path)
    assert scenario.network is not None
    assert [r.label for r in scenario.runs] == ["openmpi", "mpich"]
    for run in scenario.runs:
        assert run.scenario == path and run.ppn == 2 and run.transport == "tcp"


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('[defaults]\nmpi = "openmpi"\ntransport = "shm"\n' + NETWORK, "defaults.transport", "ppn"),
        (
            '[defaults]\nmpi = "openmpi"\n[matrix]\nnp = [2, 4]\n' + NETWORK,
            "matrix.np",
            "[network]",
        ),
        ('[[run]]\nmpi = "openmpi"\nnp = 4\n' + NETWORK, "run[0].np", "one host per site"),
        ('[[run]]\nmpi = "openmpi"\nppn = 2\n', "run[0].ppn", "needs a [network]"),
        ('[[run]]\nmpi = "openmpi"\nppn = 0\n' + NETWORK, "run[0].ppn", "positive integer"),
    ],
)
def test_network_scenario_rejects_local_keys(
    tmp_path: Path, text: str, where: str, problem: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message and where in message and problem in message, message


# ---- striped point-to-point: lanes in the matrix, helper ranks, the seed-000 scenarios ----

SEED_LANES = [
    "stock", "mpi", "tcp:1", "tcp:2", "tcp:4", "tcp:16", "tcp:auto", "helper:1", "helper:2",
]  # fmt: skip
SEED_MODES = ["none", "auth", "aead"]  # tcp:8 in each, back to back per MPI


def test_seed000_stripe_scenario() -> None:
    scenario = load_scenario(REPO / "scenarios" / "seed000-stripe.toml")
    reference = load_scenario(REPO / "scenarios" / "wan-2site.toml")
    assert scenario.name == "seed000-stripe" and scenario.check_streams == (1, 8, 32)
    assert scenario.network == reference.network
    assert len(scenario.runs) == 24
    expected = [f"{mpi}-{lanes}" for mpi in ("openmpi", "mpich") for lanes in SEED_LANES]
    expected += [f"{mpi}-tcp:8-{mode}" for mpi in ("openmpi", "mpich") for mode in SEED_MODES]
    assert [r.label for r in scenario.runs] == expected
    # every run names its link security: auth (the library's default) but for tcp:8's modes
    modes = [(r.options["lanes"], r.options["security"]) for r in scenario.runs]
    assert (
        modes
        == [(lanes, "auth") for lanes in SEED_LANES] * 2
        + [("tcp:8", mode) for mode in SEED_MODES] * 2
    )
    for run in scenario.runs:
        lanes = run.options["lanes"]
        helpers = int(lanes.split(":")[1]) if lanes.startswith("helper:") else 0
        assert run.benchmark == "stripe" and run.transport == "tcp"
        assert run.scenario == REPO / "scenarios" / "seed000-stripe.toml"
        assert run.ppn == 1 + helpers  # K helper ranks per host besides the benchmark's
        assert run.np is None  # sites x ppn, from the live test bed
        assert run.options["tests"] == "pingpong,stream"
        assert run.options["reps"] == 3 and run.options["max_iters"] <= 10
        assert run.timeout_s is not None and run.timeout_s <= 600
    sizes = parse_size_spec(scenario.runs[0].options["sizes"])
    assert min(sizes) <= 64 * 1024 and any(s <= 256 * 1024 for s in sizes)  # sub-threshold
    assert 100 * 1024 in sizes and 2**20 in sizes and 10 * 2**20 in sizes


@pytest.mark.parametrize(
    ("file", "network"),
    [("seed000-stripe-perflow", "wan-perflow"), ("seed000-stripe-lossy", "wan-lossy")],
)
def test_seed000_stripe_variants(file: str, network: str) -> None:
    scenario = load_scenario(REPO / "scenarios" / f"{file}.toml")
    assert scenario.network == load_scenario(REPO / "scenarios" / f"{network}.toml").network
    assert scenario.check_streams == (1, 8, 32)
    lanes = [(r.mpi, r.options["lanes"], r.options["security"], r.ppn) for r in scenario.runs]
    assert lanes == [
        (mpi, spec, "auth", 3 if spec == "helper:2" else 1)
        for mpi in ("openmpi", "mpich")
        for spec in ("stock", "tcp:16", "tcp:auto", "helper:2")
    ] + [(mpi, "tcp:8", mode, 1) for mpi in ("openmpi", "mpich") for mode in SEED_MODES]
    assert parse_size_spec(scenario.runs[0].options["sizes"]) == [2**20, 10 * 2**20]


# Issue 20's sweeps: tcp:auto against the fixed counts on each network, one file per network
FIXED = ["tcp:1", "tcp:2", "tcp:4", "tcp:8", "tcp:16", "tcp:32", "tcp:64"]


@pytest.mark.parametrize(
    ("file", "network", "fixed"),
    [
        ("stripe-auto-2site", "wan-2site", FIXED),
        ("stripe-auto-perflow", "wan-perflow", FIXED),
        ("stripe-auto-lossy", "wan-lossy", FIXED),
        ("stripe-auto-long", "wan-long", FIXED[4:]),  # one lane ~20 Mbit/s: tcp:16 and up
        ("stripe-auto-short", "wan-short", FIXED),
    ],
)
def test_stripe_auto_scenarios(file: str, network: str, fixed: list[str]) -> None:
    scenario = load_scenario(REPO / "scenarios" / f"{file}.toml")
    assert scenario.name == file
    assert scenario.network == load_scenario(REPO / "scenarios" / f"{network}.toml").network
    assert scenario.check_streams == ((1, 8, 32, 64) if network == "wan-long" else (1, 8, 32))
    lanes = [*fixed, "tcp:auto"]
    assert [r.label for r in scenario.runs] == [
        f"{mpi}-{spec}" for mpi in ("openmpi", "mpich") for spec in lanes
    ]
    for run in scenario.runs:
        assert run.benchmark == "stripe" and run.ppn == 1 and run.np is None
        assert {k: v for k, v in run.options.items() if k != "lanes"} == {
            "tests": "pingpong,stream",
            "sizes": "1M,10M,64M",
            "reps": 3,
            "warmup": 1,
            "min_iters": 1,
            "security": "auth",
            # 16 ping-pongs of 1 MiB a repetition: the median of 3 is past a lone class's search
            "iter_budget": "16M",
            "max_iters": 16,
        } | (  # wan-long: a window of ~45 bandwidth-delay products
            {"window": 32, "window_bytes": "320M"}
            if network == "wan-long"
            # wan-lossy: windows that measure the stream, not the sync at their end (the
            # scenario's comment)
            else {"window_bytes": "256M" if network == "wan-lossy" else "64M"}
        )
        assert run.timeout_s is not None and run.timeout_s <= 1200


def test_wan_long_and_short_networks() -> None:
    """wan-long: 60 ms RTT, a 128 KiB window, a queue of one BDP; wan-short: 2 ms RTT,
    autotuned buffers, a queue of one BDP."""
    long = load_scenario(REPO / "scenarios" / "wan-long.toml").network
    short = load_scenario(REPO / "scenarios" / "wan-short.toml").network
    assert long is not None and short is not None
    for network, delay, queue in ((long, 0.030, 7_500_000), (short, 0.001, 250_000)):
        assert network.mtu == 9000 and [len(s.hosts) for s in network.sites] == [1, 1]
        (wan,) = network.wan
        for props in (wan.ab, wan.ba):
            assert (props.rate_bps, props.delay_s, props.queue_bytes) == (10**9, delay, queue)
            assert props.loss == 0 and props.flow_rate_bps == 0
            assert props.queue_bytes == props.rate_bps * 2 * props.delay_s / 8  # one BDP
    for host in long.hosts:
        assert host.tcp == TcpSettings(rmem_max=262144, wmem_max=262144, congestion="cubic")
    for host in short.hosts:
        assert host.tcp == TcpSettings(rmem_max=None, wmem_max=None, congestion="cubic")


def test_lanes_matrix_local(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[defaults]\nbenchmark = "stripe"\nmpi = "openmpi"\nlocal = 1\n'
        '[matrix]\nlanes = ["tcp:4", "helper:2"]\nwindow = [4, 16]\n',
    )
    runs = load_scenario(path).runs
    assert [r.label for r in runs] == [
        "tcp:4-window4", "tcp:4-window16", "helper:2-window4", "helper:2-window16",
    ]  # fmt: skip
    assert [r.np for r in runs] == [2, 2, 4, 4]  # one host: a pair + K helpers
    assert runs[2].options == {"local": 1, "lanes": "helper:2", "window": 4}


def test_security_matrix_labels(tmp_path: Path) -> None:
    """security in the matrix: one run per mode, labelled by its value like lanes."""
    path = _write(
        tmp_path,
        '[defaults]\nbenchmark = "stripe"\nmpi = "openmpi"\n'
        '[matrix]\nlanes = ["tcp:8"]\nsecurity = ["none", "auth+mac", "aead"]\n',
    )
    runs = load_scenario(path).runs
    assert [r.label for r in runs] == ["tcp:8-none", "tcp:8-auth+mac", "tcp:8-aead"]
    assert [r.options["security"] for r in runs] == ["none", "auth+mac", "aead"]
    assert all(r.env == {} for r in runs)  # the variables are set when the run is prepared


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        (
            '[defaults]\nbenchmark = "stripe"\nmpi = "mpich"\n[matrix]\nsecurity = ["tls"]\n',
            "matrix.security[0]",
            "invalid security mode 'tls' (expected auth, auth+mac, aead or none)",
        ),
        (
            '[[run]]\nbenchmark = "stripe"\nmpi = "mpich"\nsecurity = "auth,aead"\n',
            "run[0]",
            "security: invalid security mode 'auth,aead'",
        ),
        (
            '[[run]]\nbenchmark = "stripe"\nmpi = "mpich"\nsecurity = "aead"\n'
            'env = { MLN_LINK_SECURITY = "none" }\n',
            "run[0]",
            "env sets MLN_LINK_SECURITY=none, security = 'aead' sets MLN_LINK_SECURITY=aead",
        ),
        (
            '[[run]]\nmpi = "mpich"\nsecurity = "aead"\n',
            "run[0]",
            "unknown option 'security' for pt2pt",
        ),
    ],
)
def test_security_bad(tmp_path: Path, text: str, where: str, problem: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(_write(tmp_path, text))
    message = str(info.value)
    assert f": {where}: " in message and problem in message, message


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        (
            '[defaults]\nbenchmark = "stripe"\nmpi = "mpich"\n[matrix]\nlanes = ["tcp:8", "tcp"]\n',
            "matrix.lanes[1]",
            "invalid lanes 'tcp' (expected stock (plain MPI), mpi or mpi:N, tcp:N",
        ),
        (
            '[defaults]\nbenchmark = "stripe"\nmpi = "mpich"\n[matrix]\nlanes = ["helper:20"]\n',
            "matrix.lanes[0]",
            "at most 16 helper ranks per host",
        ),
        (
            '[defaults]\nmpi = "mpich"\n[matrix]\nlanes = ["tcp:8"]\n',
            "matrix.lanes",
            "not an option of benchmark pt2pt",
        ),
        (
            '[defaults]\nmpi = "mpich"\n[matrix]\nlanse = ["tcp:8"]\n',
            "matrix.lanse",
            "unknown key (allowed: benchmark, mpi, transport, np, ppn,",
        ),
        (
            '[defaults]\nmpi = "mpich"\nbenchmark = "stripe"\n[matrix]\nlanes = "tcp:8"\n',
            "matrix.lanes",
            "non-empty array",
        ),
        (
            '[[run]]\nmpi = "mpich"\nbenchmark = "stripe"\nlanes = "helper:2"\nnp = 2\n',
            "run 1 (mpich-shm)",
            "lanes helper:2 needs 4 ranks on one host (a benchmark pair + 2 helper ranks), "
            "got np 2",
        ),
        (
            '[[run]]\nmpi = "mpich"\nlanes = "tcp:8"\n',
            "run[0]",
            "unknown option 'lanes' for pt2pt",
        ),
        ('testbed_check = true\n[[run]]\nmpi = "mpich"\n', "testbed_check", "needs a [network]"),
        (
            'testbed_check = "yes"\n[[run]]\nmpi = "mpich"\n',
            "testbed_check",
            "expected true, false or an array",
        ),
    ],
)
def test_lanes_validation_errors(tmp_path: Path, text: str, where: str, problem: str) -> None:
    _refused(_write(tmp_path, text), where, problem)


def test_helper_ppn_conflict_on_a_network(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[defaults]\nbenchmark = "stripe"\nmpi = "openmpi"\nppn = 2\n'
        '[matrix]\nlanes = ["tcp:8", "helper:2"]\n' + NETWORK,
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value) == (
        f"{path}: run 2 (helper:2): lanes helper:2 needs 3 ranks per host (1 benchmark rank + "
        "2 helper ranks), got ppn 2: leave ppn out, it is set for you"
    )


# ---- testbed_check: true, false or the iperf3 stream counts -------------------------------


@pytest.mark.parametrize(
    ("value", "streams"),
    [
        ("true", (1, 8)),
        ("false", ()),
        ("[1, 2, 4, 8]", (1, 2, 4, 8)),
        ("[4]", (4,)),
        ("[8, 1, 64]", (8, 1, 64)),  # in the order given
    ],
)
def test_testbed_check_streams(tmp_path: Path, value: str, streams: tuple[int, ...]) -> None:
    path = _write(tmp_path, f'testbed_check = {value}\n[[run]]\nmpi = "mpich"\n' + NETWORK)
    scenario = load_scenario(path)
    assert scenario.check_streams == streams
    assert scenario.testbed_check is bool(streams)


@pytest.mark.parametrize(
    ("value", "where", "problem"),
    [
        ("[]", "testbed_check", "expected at least one stream count (1..64)"),
        ("[1, 0]", "testbed_check[1]", "expected a stream count from 1 to 64, got 0"),
        ("[65]", "testbed_check[0]", "expected a stream count from 1 to 64, got 65"),
        ("[-2]", "testbed_check[0]", "from 1 to 64, got -2"),
        ("[1, 2, 4, 2]", "testbed_check[3]", "stream count 2 is given twice (counts must differ)"),
        ('[1, "2"]', "testbed_check[1]", "expected a stream count (an integer), got '2'"),
        ("[1, 2.0]", "testbed_check[1]", "(an integer), got 2.0"),
        ("[true]", "testbed_check[0]", "(an integer), got True"),
        ('"yes"', "testbed_check", "expected true, false or an array of iperf3 stream counts"),
        ("4", "testbed_check", "such as [1, 2, 4, 8], got integer"),
    ],
)
def test_testbed_check_streams_refused(
    tmp_path: Path, value: str, where: str, problem: str
) -> None:
    text = f'testbed_check = {value}\n[[run]]\nmpi = "mpich"\n' + NETWORK
    _refused(_write(tmp_path, text), where, problem)


def test_testbed_check_array_needs_a_network(tmp_path: Path) -> None:
    path = _write(tmp_path, 'testbed_check = [1, 2]\n[[run]]\nmpi = "mpich"\n')
    with pytest.raises(ScenarioError, match=r"testbed_check: needs a \[network\]"):
        load_scenario(path)


# ---- the broadcast: its scenario and options ----------------------------------------------


def test_bcast_2site_scenario() -> None:
    scenario = load_scenario(REPO / "scenarios" / "bcast-2site.toml")
    assert scenario.name == "bcast-2site"
    network = scenario.network
    assert network is not None
    assert [(h.name, h.site) for h in network.hosts] == [
        ("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b"),
    ]  # fmt: skip
    (wan,) = network.wan
    assert (wan.site_a, wan.site_b) == ("a", "b")
    assert wan.ab.rate_bps == wan.ba.rate_bps == 10**9
    assert wan.ab.delay_s == wan.ba.delay_s == pytest.approx(0.005)
    assert all(h.tcp.rmem_max == h.tcp.wmem_max == 262144 for h in network.hosts)
    # the premise "1 stream cannot fill the WAN, L streams can", for L = 1, 2, 4
    assert {1, 2, 4} <= set(scenario.check_streams)


def test_bcast_options_in_a_scenario(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        'name = "b"\n[defaults]\nbenchmark = "bcast"\nmpi = "openmpi"\nppn = 2\nalgo = "sme"\n'
        "root = 1\n[matrix]\nleaders = [1, 2, 4]\n" + NETWORK,
    )
    runs = load_scenario(path).runs
    assert [r.label for r in runs] == ["leaders1", "leaders2", "leaders4"]
    assert [r.options for r in runs] == [
        {"algo": "sme", "root": 1, "leaders": n} for n in (1, 2, 4)
    ]
    assert all(r.benchmark == "bcast" and r.ppn == 2 and r.scenario == path for r in runs)


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        (
            '[[run]]\nmpi = "mpich"\nbenchmark = "bcast"\nalgo = "fast"\n',
            "run[0]",
            "algo: expected one of stock, mpi, sme, hier, auto, got 'fast'",
        ),
        (
            '[[run]]\nmpi = "mpich"\nbenchmark = "bcast"\nleaders = "2"\n',
            "run[0]",
            "leaders: expected leaders per node from 1 to 1024 (0: the default), got '2'",
        ),
        (
            '[[run]]\nmpi = "mpich"\nbenchmark = "bcast"\nroot = -1\n',
            "run[0]",
            "root: expected an integer >= 0, got -1",
        ),
        (
            '[defaults]\nbenchmark = "bcast"\nmpi = "mpich"\n[matrix]\nleaders = [2, 2000]\n',
            "matrix.leaders[1]",
            "expected leaders per node from 1 to 1024",
        ),
        (
            '[defaults]\nmpi = "mpich"\n[matrix]\nalgo = ["sme"]\n',
            "matrix.algo",
            "not an option of benchmark pt2pt",
        ),
        ('[[run]]\nmpi = "mpich"\nalgo = "sme"\n', "run[0]", "unknown option 'algo' for pt2pt"),
        (
            '[[run]]\nmpi = "mpich"\nbenchmark = "bcast"\nnp = 8\n' + NETWORK,
            "run[0].np",
            "its runs go one host per site (bcast, halo, nas-is, nas-mg, nas-lu: every host) over",
        ),
    ],
)
def test_bcast_validation_errors(tmp_path: Path, text: str, where: str, problem: str) -> None:
    _refused(_write(tmp_path, text), where, problem)


def test_streams_text() -> None:
    """How `multilane run` and the dry run name the check's stream counts."""
    assert streams_text(DEFAULT_STREAMS) == "1 and 8 streams"
    assert streams_text((1, 2, 4, 8)) == "1, 2, 4 and 8 streams"
    assert streams_text((1,)) == "1 stream"
    assert streams_text((4,)) == "4 streams"


# ---- hosts = N: only the first N test-bed hosts; the shipped scenarios -------------------


def test_every_shipped_scenario_loads() -> None:
    paths = sorted((REPO / "scenarios").glob("*.toml"))
    assert len(paths) >= 10
    for path in paths:
        load_scenario(path)  # ScenarioError names the file, key and problem


def test_hosts_in_runs_and_matrix(tmp_path: Path) -> None:
    two = two_sites_network("100mbit", "1ms", hosts=2)  # a1, a2, b1, b2
    path = _write(
        tmp_path,
        '[defaults]\nmpi = "openmpi"\nbenchmark = "bcast"\nppn = 2\n[matrix]\nhosts = [1, 4]\n'
        '[[run]]\nlabel = "three"\nhosts = 3\n[[run]]\nlabel = "all"\n' + two,
    )
    runs = load_scenario(path).runs
    assert [(r.label, r.hosts, r.ppn) for r in runs] == [
        ("hosts1", 1, 2), ("hosts4", 4, 2), ("three", 3, 2), ("all", None, 2),
    ]  # fmt: skip
    assert all("hosts" not in r.options for r in runs)  # a run key, not a program option


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('[[run]]\nmpi = "openmpi"\nhosts = 1\n', "run[0].hosts", "hosts needs a [network]"),
        ('[[run]]\nmpi = "openmpi"\nhosts = 0\n' + NETWORK, "run[0].hosts", "positive integer"),
        ('[[run]]\nmpi = "openmpi"\nhosts = "2"\n' + NETWORK, "run[0].hosts", "got '2'"),
        (
            '[[run]]\nmpi = "openmpi"\nhosts = 3\n' + NETWORK,
            "run[0].hosts",
            "3 hosts asked, the test bed has 2 (a1, b1): expected 1 to 2",
        ),
        (
            '[defaults]\nmpi = "openmpi"\nhosts = 9\n' + NETWORK,
            "defaults.hosts",
            "9 hosts asked, the test bed has 2 (a1, b1): expected 1 to 2",
        ),
        (
            '[defaults]\nmpi = "openmpi"\n[matrix]\nhosts = [1, 5]\n' + NETWORK,
            "matrix.hosts[1]",
            "5 hosts asked, the test bed has 2",
        ),
        ('[defaults]\nmpi = "openmpi"\n[matrix]\nhosts = [1, 0]\n', "matrix.hosts[1]", "positive"),
    ],
)
def test_hosts_validation_errors(tmp_path: Path, text: str, where: str, problem: str) -> None:
    _refused(_write(tmp_path, text), where, problem)


def test_seed002_halo_scenario() -> None:
    scenario = load_scenario(REPO / "scenarios" / "seed002-halo.toml")
    assert scenario.network == load_scenario(REPO / "scenarios" / "lan-4host.toml").network
    assert scenario.name == "seed002-halo" and not scenario.testbed_check
    runs = scenario.runs
    assert len(runs) == 14
    table = [r for r in runs if r.options["sizes"] == "1280"]
    assert sorted((r.mpi, r.hosts, r.ppn, r.options["dims"]) for r in table) == sorted(
        (mpi, hosts, 8 // hosts, dims)
        for mpi in ("openmpi", "mpich")
        for hosts in (1, 4)
        for dims in (1, 2, 3)
    )  # 8 ranks each: a ring of 8, 4x2, 2x2x2
    for run in runs:
        assert run.benchmark == "halo" and run.transport == "tcp"
        assert run.options["tests"].split(",") == [
            "p2p", "neighbor", "rma-fence", "rma-pscw", "rma-passive", "rma-single", "auto",
        ]  # fmt: skip
        assert run.options["periodic"] == 1 and run.options["radius"] == 1
        assert run.options["reps"] >= 3 and run.timeout_s is not None
    for run in table:  # at least 1000 timed iterations per cell (MPICH: in several reps)
        assert run.options["min_iters"] == run.options["max_iters"]
        assert run.options["max_iters"] * run.options["reps"] >= 1000
        assert run.options["max_iters"] == 1000 or run.mpi == "mpich"
    sweeps = [r for r in runs if r not in table]
    assert [(r.mpi, r.hosts, r.ppn, r.options["dims"]) for r in sweeps] == [
        ("openmpi", 1, 8, 2), ("mpich", 1, 8, 2),
    ]  # fmt: skip
    for run in sweeps:
        sizes = parse_size_spec(run.options["sizes"])
        assert sizes == [8, 64, 512, 1280, 4096, 32768, 262144, 2**20]
        # the harness rule: budget / size within [min, max]: max_iters up to 1280 B
        budget, low, high = (run.options[k] for k in ("iter_budget", "min_iters", "max_iters"))
        assert [min(max(budget // s, low), high) for s in sizes][:4] == [high] * 4
        assert min(max(budget // 2**20, low), high) == low == 20


# ---- seed 003: matmul and gpu-transfer keys, site and testbed = false ----------------------

TWO_SITES_NO_WAN = (
    '[network]\n[[network.site]]\nname = "eth"\nhosts = 2\nnic_rate = "1gbit"\n'
    '[[network.site]]\nname = "fast"\nhosts = 2\n'
)


def test_matmul_options_in_a_scenario(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[defaults]\nbenchmark = "matmul"\nmpi = "openmpi"\nn = [1000, 2000]\nreps = 2\n'
        '[matrix]\nlayout = ["rows", "blocks2x2"]\n[[run]]\nlabel = "gpu"\nnp = 4\ngpu = true\n'
        'n = "500,4000"\nexact_max_n = 0\nblas_threads = 2\n',
    )
    runs = load_scenario(path).runs
    assert [r.label for r in runs] == ["layoutrows", "layoutblocks2x2", "gpu"]
    from multilane.benchmarks import MATMUL  # noqa: PLC0415

    assert MATMUL.option_args(runs[1].options) == [
        "--n", "1000,2000", "--reps", "2", "--layout", "blocks2x2",
    ]  # fmt: skip
    assert MATMUL.option_args(runs[2].options) == [
        "--n", "500,4000", "--reps", "2", "--gpu", "--exact-max-n", "0", "--blas-threads", "2",
    ]  # fmt: skip
    assert MATMUL.option_args({"gpu": 0}) == []  # a switch: no flag for 0 / false


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("n = 0", "run[0]", "n: expected matrix sizes N from 1 to 46340, got 0"),
        ("n = [1000, 50000]", "run[0]", "n: expected matrix sizes N from 1 to 46340, got 50000"),
        ('n = "1000,abc"', "run[0]", "n: expected matrix sizes N from 1 to 46340, got 'abc'"),
        ("n = [2000, 1000]", "run[0]", "n: expected N in increasing order without repeats"),
        ("n = [1000, 1000]", "run[0]", "n: expected N in increasing order without repeats"),
        ("n = []", "run[0]", "n: expected N or a list of N such as [1000, 2000], got []"),
        ('layout = "cols"', "run[0]", "layout: expected one of rows, blocks2x2, got 'cols'"),
        ("gpu = 2", "run[0]", "gpu: expected 0 or 1 (or true/false), got 2"),
        ("exact_max_n = -1", "run[0]", "exact_max_n: expected an integer >= 0, got -1"),
        ("blas_threads = 0", "run[0]", "blas_threads: expected BLAS threads from 1 to 1024, got 0"),
        ('sizes = "1:4M"', "run[0]", "unknown option 'sizes' for matmul (known: n, reps, layout"),
    ],
)
def test_matmul_validation_errors(tmp_path: Path, text: str, where: str, problem: str) -> None:
    _refused(_write(tmp_path, f'[[run]]\nmpi = "mpich"\nbenchmark = "matmul"\n{text}\n'), where,
             problem)  # fmt: skip


def test_matmul_matrix_values_are_checked(tmp_path: Path) -> None:
    text = '[defaults]\nbenchmark = "matmul"\nmpi = "mpich"\n[matrix]\nlayout = ["rows", "x"]\n'
    _refused(_write(tmp_path, text), "matrix.layout[1]", "expected one of rows, blocks2x2")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('tests = "host,nvlink"', "tests: unknown name(s) nvlink (known: host, cuda-aware"),
        ("slots = 17", "slots: expected pinned slots from 2 to 16, got 17"),
        ("slots = 1", "slots: expected pinned slots from 2 to 16, got 1"),
        ('chunk = "0"', "chunk: expected a size of at least 1 such as 4M"),
        ('chunk = "1536M"', "chunk: expected a chunk of at most 1G, got '1536M'"),
        ('sizes = "1:"', "sizes: "),
    ],
)
def test_gpu_transfer_validation_errors(tmp_path: Path, text: str, problem: str) -> None:
    body = f'[[run]]\nmpi = "openmpi"\nbenchmark = "gpu-transfer"\n{text}\n'
    _refused(_write(tmp_path, body), "run[0]", problem)


def test_gpu_transfer_options(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[[run]]\nmpi = "openmpi"\nbenchmark = "gpu-transfer"\nsizes = "1K:64M"\n'
        'tests = "staged,pipelined"\nchunk = "512K"\nslots = 4\nreps = 5\n',
    )
    (run,) = load_scenario(path).runs
    assert (run.benchmark, run.np, run.label) == ("gpu-transfer", 2, "openmpi-shm")
    assert run.options == {
        "sizes": "1K:64M", "tests": "staged,pipelined", "chunk": "512K", "slots": 4, "reps": 5,
    }  # fmt: skip


def test_local_and_site_runs_in_a_network_scenario(tmp_path: Path) -> None:
    """testbed = false keeps a run on this machine (transport, np) while the test bed is up;
    site = NAME puts a test-bed run on that site's hosts; [defaults] keys of the other kind
    do not apply."""
    path = _write(
        tmp_path,
        '[defaults]\nbenchmark = "matmul"\nmpi = "openmpi"\nppn = 2\n'
        '[[run]]\ntestbed = false\ntransport = "tcp"\nnp = 4\n'
        "[[run]]\ntestbed = false\n"
        '[[run]]\nsite = "fast"\n'
        '[[run]]\nlabel = "one"\nsite = "eth"\nhosts = 1\nppn = 4\n' + TWO_SITES_NO_WAN,
    )
    runs = load_scenario(path).runs
    assert [(r.label, r.scenario is None, r.transport, r.np, r.ppn, r.site, r.hosts)
            for r in runs] == [
        ("openmpi-tcp", True, "tcp", 4, None, None, None),
        ("openmpi-shm", True, "shm", 2, None, None, None),
        ("openmpi", False, "tcp", None, 2, "fast", None),
        ("one", False, "tcp", None, 4, "eth", 1),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('[[run]]\nmpi = "openmpi"\nsite = "eth"\n', "run[0].site", "site needs a [network]"),
        ('[[run]]\nmpi = "openmpi"\ntestbed = false\n', "run[0].testbed", "needs a [network]"),
        (
            '[[run]]\nmpi = "openmpi"\nsite = "lan"\n' + TWO_SITES_NO_WAN,
            "run[0].site",
            "no site 'lan' in the [network] (its sites: eth, fast)",
        ),
        (
            '[defaults]\nmpi = "openmpi"\n[matrix]\nsite = ["eth", "x"]\n' + TWO_SITES_NO_WAN,
            "matrix.site[1]",
            "no site 'x' in the [network]",
        ),
        ('[[run]]\nmpi = "openmpi"\nsite = 3\n' + TWO_SITES_NO_WAN, "run[0].site", "non-empty"),
        (
            '[[run]]\nmpi = "openmpi"\ntestbed = "no"\n' + TWO_SITES_NO_WAN,
            "run[0].testbed",
            "expected true or false, got 'no'",
        ),
        (
            '[[run]]\nmpi = "openmpi"\ntestbed = false\nppn = 2\n' + TWO_SITES_NO_WAN,
            "run[0].ppn",
            "not for a run with testbed = false: it runs on this machine (transport, np)",
        ),
        (
            '[[run]]\nmpi = "openmpi"\ntestbed = false\nsite = "eth"\n' + TWO_SITES_NO_WAN,
            "run[0].site",
            "not for a run with testbed = false",
        ),
        (
            '[[run]]\nmpi = "openmpi"\ntransport = "tcp"\n' + TWO_SITES_NO_WAN,
            "run[0].transport",
            "(use ppn for ranks per host; testbed = false keeps a run on this machine)",
        ),
        (
            '[[run]]\nmpi = "openmpi"\nsite = "eth"\nhosts = 3\n' + TWO_SITES_NO_WAN,
            "run 1 (openmpi)",
            "3 hosts asked in site eth, which has 2 (eth1, eth2): expected 1 to 2",
        ),
    ],
)
def test_site_and_testbed_validation_errors(
    tmp_path: Path, text: str, where: str, problem: str
) -> None:
    _refused(_write(tmp_path, text), where, problem)


def test_seed003_cluster_scenario() -> None:
    """{openmpi, mpich} x {shm, tcp on this machine; sites eth (1 Gbit/s NICs) and fast (no
    limit) of the test bed} x {2, 4} ranks x N 1000, 2000, 4000, 8000."""
    scenario = load_scenario(REPO / "scenarios" / "seed003-cluster.toml")
    assert scenario.name == "seed003-cluster" and scenario.testbed_check
    network = scenario.network
    assert network is not None and not network.wan
    assert [(h.name, h.site, h.nic_rate_bps) for h in network.hosts] == [
        ("eth1", "eth", 10**9), ("eth2", "eth", 10**9), ("fast1", "fast", 0), ("fast2", "fast", 0),
    ]  # fmt: skip
    cells = set()
    for run in scenario.runs:
        assert run.benchmark == "matmul" and run.options["layout"] == "rows"
        assert run.options["reps"] == 3 and "gpu" not in run.options
        if run.scenario is None:
            where, ranks = run.transport, run.np
            assert run.ppn is None and run.site is None
        else:
            assert run.site is not None and run.ppn is not None and run.hosts is None
            where, ranks = run.site, 2 * run.ppn  # both hosts of the site
        assert run.options["n"] == [1000, 2000, 4000, 8000] and run.timeout_s == 900.0
        assert run.label == f"{run.mpi}-{where}-np{ranks}"
        cells.add((run.mpi, where, ranks))
    assert cells == {
        (mpi, where, ranks)
        for mpi in ("openmpi", "mpich")
        for where in ("shm", "tcp", "eth", "fast")
        for ranks in (2, 4)
    }


PRIVATE_NET = (REPO / "scenarios" / "seed004-relay-small.toml").read_text()


def test_network_and_wan_delay_factors(tmp_path: Path) -> None:
    """`network` and `wan_delay` in [matrix]: each run carries them; the runner's groups
    build the test bed once per network and change the delay once per value."""
    from multilane.experiment import has_testbed_factors, testbed_groups  # noqa: PLC0415

    text = PRIVATE_NET + (
        '[defaults]\nmpi = "openmpi"\n[matrix]\nnetwork = ["direct", "private"]\n'
        'wan_delay = [0, "1ms", "10ms"]\n'
        '[[run]]\nmpi = "mpich"\nlabel = "local"\ntestbed = false\ntransport = "tcp"\n'
        '[[run]]\nmpi = "mpich"\nlabel = "plain"\n'
    )
    scenario = load_scenario(_write(tmp_path, text))
    runs = [(r.label, r.network_variant, r.wan_delay_s) for r in scenario.runs]
    assert runs[:3] == [
        ("direct-delay0ms", "direct", 0.0),
        ("direct-delay1ms", "direct", 0.001),
        ("direct-delay10ms", "direct", 0.01),
    ]
    assert runs[3][:2] == ("private-delay0ms", "private")
    assert runs[6:] == [("local", None, None), ("plain", None, None)]
    assert has_testbed_factors(scenario)
    assert testbed_groups(scenario) == [
        ("direct", [(0.0, [6, 0]), (0.001, [1]), (0.01, [2])]),
        ("private", [(0.0, [3]), (0.001, [4]), (0.01, [5]), (None, [7])]),
    ]
    plain = load_scenario(REPO / "scenarios" / "seed004-relay-small.toml")  # no runs
    assert not has_testbed_factors(plain)
    assert testbed_groups(plain) == [("private", [(None, [])])]


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('[[run]]\nmpi = "openmpi"\nnetwork = "nat"\n', "run[0].network", "expected one of"),
        ('[[run]]\nmpi = "openmpi"\nwan_delay = 5\n', "run[0].wan_delay", "invalid time 5"),
        ('[[run]]\nmpi = "openmpi"\nwan_delay = "11s"\n', "run[0].wan_delay", "at most 10s"),
        (
            '[[run]]\nmpi = "openmpi"\nnetwork = "private"\n',
            "run[0].network",
            'the [network] has no private site: only "direct"',
        ),
        (
            '[matrix]\nmpi = ["openmpi"]\nnetwork = ["direct", "x"]\n',
            "matrix.network[1]",
            "expected one of private, direct",
        ),
    ],
)
def test_network_factor_errors(tmp_path: Path, text: str, where: str, problem: str) -> None:
    _refused(_write(tmp_path, NETWORK + text), where, problem)


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('[[run]]\nmpi = "openmpi"\nnetwork = "direct"\n', "run[0].network", "needs a [network]"),
        ('[[run]]\nmpi = "openmpi"\nwan_delay = "1ms"\n', "run[0].wan_delay", "needs a [network]"),
        (
            '[network]\n[[network.site]]\nname = "a"\n[[run]]\nmpi = "openmpi"\nwan_delay = 0\n',
            "run[0].wan_delay",
            "no WAN link to delay",
        ),
        (
            PRIVATE_NET
            + '[[run]]\nmpi = "openmpi"\ntestbed = false\ntransport = "tcp"\nnetwork = "direct"\n',
            "run[0].network",
            "not for a run with testbed = false",
        ),
    ],
)
def test_network_factor_needs_a_network(
    tmp_path: Path, text: str, where: str, problem: str
) -> None:
    _refused(_write(tmp_path, text), where, problem)


def test_grouped_execution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner brings the test bed up once per network and sets the delay once per value
    (then the scenario's again), planning each group's runs once its test bed is up."""
    import contextlib  # noqa: PLC0415
    import io  # noqa: PLC0415

    from multilane import experiment  # noqa: PLC0415
    from multilane.context import Context  # noqa: PLC0415
    from multilane.testbed import commands  # noqa: PLC0415

    text = PRIVATE_NET + (
        '[defaults]\nmpi = "openmpi"\n[matrix]\nnetwork = ["direct", "private"]\n'
        'wan_delay = [0, "10ms"]\n'
    )
    scenario = load_scenario(_write(tmp_path, text))
    events: list[object] = []

    class Bed:
        def __init__(self, variant: str) -> None:
            self.variant = variant

        def set_delay(self, delay: float | None) -> list[str]:
            events.append(("delay", self.variant, delay))
            return [f"wan ab: delay {delay}"]

    @contextlib.contextmanager
    def fake_testbed_for(path: Path, ctx: Context, variant: str | None = None):  # type: ignore[no-untyped-def]
        events.append(("up", variant))
        yield Bed(variant or "")
        events.append(("down", variant))

    def fake_prepare(request, ctx, out_dir):  # type: ignore[no-untyped-def]
        events.append(("prepare", request.label))
        return request

    def fake_each(prepared, ctx, start, first, total):  # type: ignore[no-untyped-def]
        events.append(("run", [r.label for r in prepared], first, total))
        return []

    monkeypatch.setattr(commands, "testbed_for", fake_testbed_for)
    monkeypatch.setattr(experiment, "prepare", fake_prepare)
    monkeypatch.setattr(experiment, "_execute_each", fake_each)
    ctx = Context(root=REPO, env={}, ncpus=2, euid=0, out=io.StringIO())
    experiment._execute_grouped(scenario, ctx, tmp_path / "out")
    assert events == [
        ("up", "direct"),
        ("delay", "direct", 0.0),
        ("prepare", "direct-delay0ms"),
        ("run", ["direct-delay0ms"], 1, 4),
        ("delay", "direct", 0.01),
        ("prepare", "direct-delay10ms"),
        ("run", ["direct-delay10ms"], 1, 4),  # fake_each returned no outcomes
        ("delay", "direct", None),
        ("down", "direct"),
        ("up", "private"),
        ("delay", "private", 0.0),
        ("prepare", "private-delay0ms"),
        ("run", ["private-delay0ms"], 1, 4),
        ("delay", "private", 0.01),
        ("prepare", "private-delay10ms"),
        ("run", ["private-delay10ms"], 1, 4),
        ("delay", "private", None),
        ("down", "private"),
    ]
