"""What each rank runs for `multilane.mpi4py_suite`: mpi4py's own test/main.py, with a result
class that writes one JSON line per test as it goes, to OUTDIR/rank-R.jsonl.

Run by path with the Python that has mpi4py (stdlib only; this file imports nothing from
multilane)::

    python mpi4py_rank.py TESTDIR OUTDIR [main.py options: -v, -i REGEX, -e REGEX, -x PATTERN]
        [--mln-skip FILE]

--mln-skip FILE names tests (one full id a line) that are not run, matched exactly (main.py's
-x matches substrings: testReduce would also leave out testReduceScatter); it may come anywhere
after OUTDIR.

Lines: {"event": "start", "id": ...} before a test runs, then {"event": "end", "id": ...,
"outcome": "pass" | "fail" | "error" | "skip" | "xfail" | "xpass", "seconds": ..., "detail":
the traceback or skip reason}, and {"event": "done"} at the end; a subtest's failure or error
is its test's.  The file is flushed after every line, so a rank that hangs or dies leaves the
test it was in as its last "start" line.  A rank killed by a fatal signal (SIGSEGV, SIGABRT, ...)
also leaves Python's traceback of that moment in OUTDIR/rank-R.fault (faulthandler, installed
after MPI's own handlers, which it then calls): the file is empty for every other end.  A test
still running after MLN_MPI4PY_STALL_S seconds (default 60) leaves every thread's traceback of
that moment in OUTDIR/rank-R.stall (where a rank waits when a test hangs)."""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
import traceback
import unittest

DETAIL_CHARS = 4000
SKIP_OPTION = "--mln-skip"
STALL_S = float(os.environ.get("MLN_MPI4PY_STALL_S", "60"))


class JsonLinesResult(unittest.TextTestResult):
    """TextTestResult that also writes each test's outcome to the rank's JSON-lines file."""

    sink = None  # the open file, set at the start of the run (MPI is initialised by then)
    fault = None  # rank-R.fault, open until the process ends
    stall = None  # rank-R.stall: tracebacks of a test still running after STALL_S

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._started = 0.0
        self._outcome = {}

    def startTestRun(self):
        super().startTestRun()
        from mpi4py import MPI  # noqa: PLC0415 - main.py has imported it by now

        rank = MPI.COMM_WORLD.Get_rank()
        outdir = os.environ["MLN_MPI4PY_OUTDIR"]
        type(self).sink = open(os.path.join(outdir, f"rank-{rank}.jsonl"), "w")  # noqa: SIM115
        type(self).fault = open(os.path.join(outdir, f"rank-{rank}.fault"), "w")  # noqa: SIM115
        faulthandler.enable(file=type(self).fault)
        type(self).stall = open(os.path.join(outdir, f"rank-{rank}.stall"), "w")  # noqa: SIM115

    def stopTestRun(self):
        super().stopTestRun()
        self._write({"event": "done", "tests": self.testsRun})
        if self.sink is not None:
            self.sink.close()
            type(self).sink = None

    def _write(self, record):
        if self.sink is not None:
            self.sink.write(json.dumps(record) + "\n")
            self.sink.flush()

    def _end(self, test, outcome, detail=""):
        key = test.id()
        if self._outcome.get(key) in ("fail", "error") and outcome == "pass":
            return  # a subtest failed: the test did not pass
        self._outcome[key] = outcome
        self._write(
            {
                "event": "end",
                "id": key,
                "outcome": outcome,
                "seconds": round(time.monotonic() - self._started, 4),
                "detail": detail[-DETAIL_CHARS:],
            }
        )

    def _text(self, err):
        return "".join(traceback.format_exception(*err))

    def startTest(self, test):
        self._started = time.monotonic()
        self._write({"event": "start", "id": test.id()})
        if self.stall is not None and STALL_S > 0:
            faulthandler.dump_traceback_later(STALL_S, file=self.stall)
        super().startTest(test)

    def stopTest(self, test):
        faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._end(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._end(test, "fail", self._text(err))

    def addError(self, test, err):
        super().addError(test, err)
        self._end(test, "error", self._text(err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._end(test, "skip", str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._end(test, "xfail", self._text(err))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._end(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._end(test, "fail" if failed else "error", f"{subtest}\n{self._text(err)}")


class JsonLinesRunner(unittest.TextTestRunner):
    resultclass = JsonLinesResult


def own_options(words):
    """(--mln-skip FILE or None, the rest for main.py)."""
    skip_file, rest, i = None, [], 0
    while i < len(words):
        if words[i] == SKIP_OPTION and i + 1 < len(words):
            skip_file = words[i + 1]
            i += 2
        else:
            rest.append(words[i])
            i += 1
    return skip_file, rest


def skip_exactly(loader_class, ids):
    """Leave the tests whose full ids are in `ids` out of what loader_class loads."""
    names_of = loader_class.getTestCaseNames

    def getTestCaseNames(self, testCaseClass):
        prefix = f"{testCaseClass.__module__}.{testCaseClass.__qualname__}."
        return [n for n in names_of(self, testCaseClass) if prefix + n not in ids]

    loader_class.getTestCaseNames = getTestCaseNames


def main(argv):
    testdir, outdir = argv[1], argv[2]
    skip_file, options = own_options(argv[3:])
    os.environ["MLN_MPI4PY_OUTDIR"] = os.path.abspath(outdir)
    sys.dont_write_bytecode = True
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # multilane's own modules (mpi.py, ...) must not shadow the suite's
    sys.path.insert(0, testdir)
    import main as suite  # noqa: PLC0415 - mpi4py's test/main.py, found through testdir

    if skip_file:
        with open(skip_file) as f:
            skip_exactly(suite.TestLoader, {line.strip() for line in f if line.strip()})
    sys.argv = [os.path.join(testdir, "main.py"), *options]
    suite.TestProgram(module=None, testRunner=JsonLinesRunner)


if __name__ == "__main__":
    main(sys.argv)
