"""The child runner: streaming, logs, exit codes, and killing the process group on timeout."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from multilane.errors import RunError
from multilane.runner import run_streaming


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_streams_lines_and_logs(tmp_path: Path) -> None:
    seen: list[str] = []
    code = "import sys\nprint('a', flush=True)\nprint('b', file=sys.stderr)\nprint('c', end='')"
    result = run_streaming(
        _py(code), env=dict(os.environ), timeout_s=30, log_path=tmp_path / "x.log",
        on_line=seen.append,
    )  # fmt: skip
    assert result.returncode == 0 and not result.timed_out
    assert sorted(seen) == ["a", "b", "c"]
    assert sorted(result.log_path.read_text().split()) == ["a", "b", "c"]


def test_exit_code_and_environment(tmp_path: Path) -> None:
    code = "import os, sys\nprint(os.environ['MLN_X'])\nsys.exit(3)"
    seen: list[str] = []
    env = {**os.environ, "MLN_X": "hello"}
    result = run_streaming(
        _py(code), env=env, timeout_s=30, log_path=tmp_path / "x.log", on_line=seen.append
    )
    assert result.returncode == 3
    assert seen == ["hello"]


def test_cpu_time_of_the_child_and_what_it_waited_for(tmp_path: Path) -> None:
    """RunResult's CPU seconds: the child's own and those of a grandchild it waited for (as
    mpirun waits for its ranks), not the runner's; a child that sleeps costs about none."""
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    code = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {spin!r}])\n{spin}"
    result = run_streaming(_py(code), env=dict(os.environ), timeout_s=60, log_path=tmp_path / "c")
    assert result.returncode == 0
    assert 0.55 <= result.cpu_s < 5.0, result
    assert result.cpu_s == result.cpu_user_s + result.cpu_sys_s
    idle = run_streaming(
        _py("import time\ntime.sleep(0.5)"), env=dict(os.environ), timeout_s=60,
        log_path=tmp_path / "i",
    )  # fmt: skip
    assert idle.cpu_s < 0.4, idle  # the interpreter's start-up only


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    code = (
        "import subprocess, time\n"
        "p = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(300)\n"
    )
    start = time.monotonic()
    result = run_streaming(_py(code), env=dict(os.environ), timeout_s=2, log_path=tmp_path / "l")
    assert result.timed_out and result.returncode is None
    assert time.monotonic() - start < 15
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    assert "started" in result.log_path.read_text()


def test_child_runs_in_its_own_session(tmp_path: Path) -> None:
    seen: list[str] = []
    code = "import os\nprint(os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid())"
    run_streaming(
        _py(code), env=dict(os.environ), timeout_s=30, log_path=tmp_path / "l",
        on_line=seen.append,
    )  # fmt: skip
    assert seen == ["True True"]


def test_missing_program(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="cannot start"):
        run_streaming(
            [str(tmp_path / "nope")], env=dict(os.environ), timeout_s=5, log_path=tmp_path / "l"
        )


def test_watchdog_stops_the_process_group(tmp_path: Path) -> None:
    """A watchdog answer stops the whole group at once, without waiting for the timeout."""
    pidfile = tmp_path / "pid"
    code = (
        "import subprocess, time\n"
        "p = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(300)\n"
    )

    def watchdog() -> str:
        return "the link died" if pidfile.exists() else ""

    start = time.monotonic()
    result = run_streaming(
        _py(code), env=dict(os.environ), timeout_s=120, log_path=tmp_path / "l", watchdog=watchdog
    )
    assert result.aborted == "the link died"
    assert result.returncode is None and not result.timed_out
    assert time.monotonic() - start < 30
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
