"""Helpers shared by the Python client tests of hoccl's libnccl.so.2 (tests/shim): skipping when a package is
missing, checking that the preloaded library is hoccl's, running N ranks as processes, counting checks."""
import importlib.util
import os
import subprocess
import sys

SKIP = 77


def require(module, how):
    """Exits 77 (skip) with a reason when `module` is not installed in this venv."""
    if importlib.util.find_spec(module) is None:
        print(f"skip: {module} is not installed in the venv ({sys.prefix}); {how}")
        sys.exit(SKIP)


def shim_path():
    """The shim this test preloads (run_client.sh exports it)."""
    return os.path.realpath(os.environ["HOCCL_SHIM_PATH"])


def loaded_ncclLibraries():
    """The libnccl files mapped into this process."""
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "libnccl" in path:
                libs.add(os.path.realpath(path))
    return libs


class Checks:
    """Counts checks and prints each failure."""

    def __init__(self, who):
        self.who, self.passed, self.failed = who, 0, 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"[{self.who}] FAILED: {what}", flush=True)
        return ok

    def finish(self):
        print(f"[{self.who}] {self.passed} checks passed, {self.failed} failed", flush=True)
        sys.exit(0 if self.failed == 0 else 1)


def run_ranks(script, nranks, uid_hex, extra, timeout=120):
    """Starts `script --rank r --nranks n --uid HEX extra...` for every rank (same environment, so the shim stays
    preloaded) and returns how many failed; a rank still running after `timeout` seconds is killed and counts."""
    procs = [subprocess.Popen([sys.executable, script, "--rank", str(r), "--nranks", str(nranks), "--uid", uid_hex]
                              + extra) for r in range(nranks)]
    bad = 0
    for r, p in enumerate(procs):
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            print(f"rank {r} hung for {timeout} s: killed")
            return nranks
        if code != 0:
            print(f"rank {r} exited with {code}")
            bad += 1
    return bad
