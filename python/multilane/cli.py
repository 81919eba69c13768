"""The `multilane` command line: mpi list, config, bench, exec, run, report, validate, testbed,
grid."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn

from . import __version__, paths
from . import mpi as mpimod
from .bench import (
    DEFAULT_TIMEOUT_S,
    EXIT_SKIPPED,
    BenchRequest,
    resolve_ranks,
    run_benches,
    with_option_env,
)
from .benchmarks import (
    BENCHMARKS,
    DEFAULT_SECURITY,
    LANES_HELP,
    SECURITY_HELP,
    get_benchmark,
    parse_lanes,
    parse_security_list,
    placement_text,
)
from .context import Context
from .errors import MultilaneError, UsageError
from .external import ExecRequest, exec_program, parse_env_items, precheck
from .external_bench import BENCHMARK as EXEC_BENCHMARK
from .external_bench import DEFAULT_REPS as EXEC_DEFAULT_REPS
from .external_bench import run_bench_exec
from .grid import add_parser as add_grid_parser
from .grid import cmd_grid
from .launchers import TRANSPORTS
from .results import load_result
from .scenario import load_scenario
from .sizes import SizeSpecError, parse_size_spec
from .testbed.commands import add_parser as add_testbed_parser
from .testbed.commands import cmd_testbed


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"multilane: error: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or str(value) != text.strip().lstrip("+"):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got '{text}'")
    return value


def _size_spec(text: str) -> str:
    try:
        parse_size_spec(text)
    except SizeSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _lanes(text: str) -> str:
    try:
        return str(parse_lanes(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _security_list(text: str) -> tuple[str, ...]:
    try:
        return parse_security_list(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int_or_text(text: str) -> object:
    """A decimal integer as int (for the option checkers), anything else as it is."""
    return int(text) if re.fullmatch(r" *-?[0-9]+ *", text) else text


# Benchmark options taken directly by `bench` (besides --sizes, --reps and --lanes): the key,
# how the text becomes the value the benchmark's checker takes, and --help's name for it.
DIRECT_OPTIONS: Mapping[str, tuple[Callable[[str], object], str]] = MappingProxyType(
    {
        "algo": (str.strip, "NAME"),
        "leaders": (_int_or_text, "L"),
        "root": (_int_or_text, "R"),
        "n": (str.strip, "N,N,..."),
        "layout": (str.strip, "NAME"),
    }
)


def _option_type(key: str) -> Callable[[str], object]:
    """argparse type of a benchmark option: checked by the (first) benchmark that has it; the
    benchmark named on the command line checks it again (unknown there: a usage error)."""
    parse = DIRECT_OPTIONS[key][0]
    check = next(b.options[key].check for b in BENCHMARKS.values() if key in b.options)

    def convert(text: str) -> object:
        value = parse(text)
        try:
            check(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    return convert


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(prog="multilane", description=__doc__)
    parser.add_argument("--version", action="version", version=f"multilane {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    mpi = sub.add_parser("mpi", help="the MPIs multilane can use")
    mpi_sub = mpi.add_subparsers(dest="mpi_command", metavar="ACTION", required=True)
    mpi_list = mpi_sub.add_parser("list", help="list MPIs: flavour, version, CUDA, prefix")
    mpi_list.add_argument("--json", action="store_true", help="print JSON")

    config = sub.add_parser("config", help="print the tunables table (mln-config)")
    config.add_argument("--mpi", help="whose build to ask (default: first built)")
    config.add_argument("--json", action="store_true", help="print JSON")

    bench = sub.add_parser(
        "bench",
        help="run one benchmark",
        usage="%(prog)s NAME [options] [-- extra program arguments]",
    )
    bench.add_argument(
        "name",
        metavar="NAME",
        help=f"benchmark ({', '.join(BENCHMARKS)}), or exec: a program after -- timed "
        "without and with the layer",
    )
    bench.add_argument("--mpi", help="openmpi, mpich or user (default: first built)")
    bench.add_argument(
        "--np", type=_positive_int, help="ranks (default 2; on a test bed: hosts x --ppn)"
    )
    bench.add_argument("--transport", choices=TRANSPORTS, help="shm (default) or tcp over lo")
    bench.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE.toml",
        help=f"run across the hosts of this scenario's test bed ({placement_text()}; "
        "brought up for the run and taken down after, unless it is already up)",
    )
    bench.add_argument(
        "--ppn",
        type=_positive_int,
        help="ranks per test-bed host (default 1; helper:K lanes: K + 1, set for you)",
    )
    bench.add_argument("--sizes", type=_size_spec, help="message sizes: 1:64M or 0,1,4K")
    bench.add_argument(
        "--reps",
        type=_positive_int,
        help=f"timed repetitions per size (exec: runs per mode, default {EXEC_DEFAULT_REPS})",
    )
    bench.add_argument("--lanes", type=_lanes, metavar="SPEC", help=f"stripe: {LANES_HELP}")
    bench.add_argument(
        "--security",
        type=_security_list,
        metavar="MODE[,MODE...]",
        help=f"stripe: {SECURITY_HELP}; default: {DEFAULT_SECURITY} (the library's); several: "
        "one run each, into one folder, then the report",
    )
    for key, (_, metavar) in DIRECT_OPTIONS.items():
        owners = [b for b in BENCHMARKS.values() if key in b.options]
        helps = dict.fromkeys(b.options[key].help for b in owners)  # matmul's --n, nas-mg's
        bench.add_argument(
            f"--{key}",
            type=_option_type(key),
            metavar=metavar,
            help="; ".join(
                f"{', '.join(b.name for b in owners if b.options[key].help == h)}: {h}"
                for h in helps
            ),
        )
    bench.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds before the run is killed (default {DEFAULT_TIMEOUT_S:g})",
    )
    bench.add_argument("--json", type=Path, metavar="FILE", help="also copy the result here")
    bench.add_argument("--results", type=Path, metavar="DIR", help="default: <root>/results")
    bench.add_argument("--label", help="run name in reports (default: MPI-TRANSPORT)")

    add_exec_parser(sub)

    run = sub.add_parser("run", help="run a scenario file and report")
    run.add_argument("scenario", type=Path, metavar="SCENARIO.toml")
    run.add_argument("--results", type=Path, metavar="DIR", help="default: <root>/results")
    run.add_argument("--dry-run", action="store_true", help="check and print the commands only")

    report = sub.add_parser("report", help="plots and report.md from result files")
    report.add_argument("dir", type=Path, metavar="DIR")
    report.add_argument("--out", type=Path, metavar="DIR", help="default: DIR")

    validate = sub.add_parser("validate", help="check result files against the schema")
    validate.add_argument("files", type=Path, nargs="+", metavar="FILE")
    add_testbed_parser(sub)
    add_grid_parser(sub)
    return parser


def add_exec_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`multilane exec [options] -- PROGRAM ARGS`."""
    exe = sub.add_parser(
        "exec",
        help="run any MPI program under the layer (libmultilane-preload.so)",
        usage="%(prog)s [--scenario FILE.toml | --hostfile FILE] [options] -- PROGRAM [ARGS...]",
    )
    exe.add_argument("--mpi", help=f"{', '.join(mpimod.KNOWN)} (default: first installed)")
    exe.add_argument("--np", type=_positive_int, help="ranks (default 2; --hostfile: its slots)")
    where = exe.add_mutually_exclusive_group()
    where.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE.toml",
        help="across the hosts of this scenario's running test bed (one host per site)",
    )
    where.add_argument(
        "--hostfile",
        type=Path,
        metavar="FILE",
        help="across real hosts: lines HOST slots=N (Open MPI) or HOST:N (MPICH)",
    )
    exe.add_argument(
        "--ppn", type=_positive_int, help="ranks per host (--scenario default 1; --hostfile)"
    )
    exe.add_argument("--transport", choices=TRANSPORTS, help="on this machine: shm (default), tcp")
    exe.add_argument("--no-layer", action="store_true", help="run without the layer, as usual")
    exe.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="set in the ranks' environment (repeatable), e.g. MLN_STRIPE_LANES=4",
    )
    exe.add_argument(
        "--stats",
        action="store_true",
        help="MLN_PRELOAD_STATS=1 and a summary of the ranks' stats lines at the end",
    )
    exe.add_argument(
        "--timeout",
        type=_positive_float,
        help="seconds before the program's process group is killed (default: none)",
    )
    exe.add_argument("--dry-run", action="store_true", help="check and print the command only")


def cmd_mpi_list(args: argparse.Namespace, ctx: Context) -> int:
    installs = mpimod.discover(ctx.root, ctx.env)
    built = {m.name: mpimod.is_built(ctx.root, m.name, "mln-pt2pt") for m in installs}
    if args.json:
        listing = [{**m.to_json(), "built": built[m.name]} for m in installs]
        ctx.say(json.dumps(listing, indent=2))
        return 0
    rows = [("name", "flavour", "version", "CUDA-aware", "built", "prefix")]
    for m in installs:
        if m.available:
            prefix = paths.display(Path(m.prefix), ctx.root)
            done = "yes" if built[m.name] else "no: make build"
            rows.append((m.name, m.flavour, m.version, m.cuda_aware, done, prefix))
        else:
            rows.append((m.name, "-", "-", "-", "-", m.hint))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        ctx.say("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    return 0


def cmd_config(args: argparse.Namespace, ctx: Context) -> int:
    install = mpimod.resolve(args.mpi, ctx.root, ctx.env, "mln-config")
    program = paths.program_path(ctx.root, install.name, "mln-config")
    argv = [str(program), *(["--json"] if args.json else [])]
    sys.stdout.flush()
    return subprocess.run(argv, env=dict(ctx.env), check=False).returncode  # noqa: S603


def cmd_exec(args: argparse.Namespace, ctx: Context) -> int:
    request = ExecRequest(
        program=tuple(args.extra),
        mpi=args.mpi,
        np=args.np,
        ppn=args.ppn,
        transport=args.transport,
        scenario=args.scenario,
        hostfile=args.hostfile,
        layer=not args.no_layer,
        stats=args.stats,
        env=parse_env_items(args.env),
        timeout_s=args.timeout,
    )
    return exec_program(request, ctx, dry_run=args.dry_run)


def cmd_bench_exec(args: argparse.Namespace, ctx: Context) -> int:
    keys = ("sizes", "lanes", "security", *DIRECT_OPTIONS)
    given = [f"--{k}" for k in keys if getattr(args, k) is not None]
    if given:
        raise UsageError(f"bench exec times a whole program: {', '.join(given)} does not apply")
    request = ExecRequest(
        program=tuple(args.extra),
        mpi=args.mpi,
        np=args.np,
        ppn=args.ppn,
        transport=args.transport,
        scenario=args.scenario,
        timeout_s=args.timeout,
    )
    results = (args.results or paths.default_results_dir(ctx.root)).resolve()
    reps = args.reps or EXEC_DEFAULT_REPS

    def bench() -> None:
        run_bench_exec(request, ctx, results, reps, label=args.label, copy_to=args.json)

    if args.scenario is None:
        bench()
        return 0
    from .testbed.commands import testbed_for  # noqa: PLC0415

    precheck(request, ctx)  # before a test bed is brought up
    with testbed_for(args.scenario, ctx):
        bench()
    return 0


def cmd_bench(args: argparse.Namespace, ctx: Context) -> int:
    if args.name == EXEC_BENCHMARK:
        return cmd_bench_exec(args, ctx)
    keys = ("sizes", "reps", "lanes", *DIRECT_OPTIONS)
    options = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    if args.json is not None and args.security is not None and len(args.security) > 1:
        raise UsageError("--json copies one result: give one --security mode with it")
    if args.scenario is not None:
        if args.transport == "shm" or args.np is not None:
            where = "to every host" if get_benchmark(args.name).every_host else "one host per site"
            raise UsageError(
                f"with --scenario the ranks go {where} over the emulated network: "
                "leave out --transport and --np (use --ppn for ranks per host)"
            )
    elif args.ppn is not None:
        raise UsageError("--ppn needs --scenario (ranks per test-bed host)")
    request = BenchRequest(
        benchmark=args.name,
        mpi=args.mpi,
        np=args.np,
        transport=args.transport or "shm",
        options=options,
        extra_args=tuple(args.extra),
        timeout_s=args.timeout,
        label=args.label,
        scenario=args.scenario,
        ppn=args.ppn,
    )
    requests = [request]
    if args.security is not None:  # one run per mode
        several = len(args.security) > 1
        requests = [
            replace(
                request,
                options={**options, "security": mode},
                label=f"{args.label}-{mode}" if args.label and several else args.label,
            )
            for mode in args.security
        ]
    bench = get_benchmark(args.name)
    for each in requests:  # before any test bed is brought up
        bench.option_args(each.options)
        with_option_env(each, bench)
        resolve_ranks(each)
    results = (args.results or paths.default_results_dir(ctx.root)).resolve()
    if args.scenario is None:
        outcomes = run_benches(requests, ctx, results, args.json)
        return EXIT_SKIPPED if all(o.skipped for o in outcomes) else 0
    from .testbed.commands import testbed_for  # noqa: PLC0415

    with testbed_for(args.scenario, ctx):
        outcomes = run_benches(requests, ctx, results, args.json)
    return EXIT_SKIPPED if all(o.skipped for o in outcomes) else 0


def cmd_run(args: argparse.Namespace, ctx: Context) -> int:
    from .experiment import run_scenario  # noqa: PLC0415 - matplotlib only when needed

    scenario = load_scenario(args.scenario)
    if not scenario.runs:
        raise UsageError(f"{args.scenario}: no runs (only a [network]: see multilane testbed up)")
    results = args.results or paths.default_results_dir(ctx.root)
    run_scenario(scenario, ctx, results.resolve(), dry_run=args.dry_run)
    return 0


def cmd_report(args: argparse.Namespace, ctx: Context) -> int:
    from .experiment import print_report  # noqa: PLC0415 - matplotlib only when needed
    from .report import make_report  # noqa: PLC0415

    print_report(make_report(args.dir, args.out), ctx)
    return 0


def cmd_validate(args: argparse.Namespace, ctx: Context) -> int:
    status = 0
    for path in args.files:
        try:
            doc = load_result(path)
        except MultilaneError as exc:
            print(f"multilane: {exc}", file=sys.stderr)
            status = 1
            continue
        rows, verdict = len(doc["rows"]), doc["status"]
        ctx.say(f"{path}: ok ({doc['benchmark']}, status {verdict}, {rows} rows)")
    return status


COMMANDS: Mapping[str, Callable[[argparse.Namespace, Context], int]] = MappingProxyType(
    {
        "mpi": cmd_mpi_list,
        "config": cmd_config,
        "bench": cmd_bench,
        "exec": cmd_exec,
        "run": cmd_run,
        "report": cmd_report,
        "validate": cmd_validate,
        "testbed": cmd_testbed,
        "grid": cmd_grid,
    }
)
NO_ROOT_NEEDED = ("report", "validate")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 a run failed, 2 bad input, 77 bench
    skipped: the program cannot measure here, e.g. no GPU)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    args.extra = extra
    try:
        takes_extra = args.command in ("bench", "exec", "grid")
        takes_extra = takes_extra or getattr(args, "testbed_command", "") == "exec"
        if extra and not takes_extra:
            raise UsageError(
                "arguments after -- are passed on by bench, exec, grid run and testbed exec only"
            )
        ctx = Context.from_environment(need_root=args.command not in NO_ROOT_NEEDED)
        return COMMANDS[args.command](args, ctx)
    except MultilaneError as exc:
        message = " ".join(str(exc).split())
        print(f"multilane: error: {message}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("multilane: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
