#!/usr/bin/env python3
"""Bad command lines of the perf tools: each must exit with code 2, print nothing on stdout (no benchmark starts),
and say on stderr, after the tool's name, which value is wrong and what would be right.

Usage: check_bad_args.py TOOL...   (paths of *_perf executables)
"""
import os
import subprocess
import sys

TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3",
         "f8e5m2"]

# (arguments, words the message must contain)
CASES = [
    (["-d", "complex128"], ["'complex128'", "-d"] + TYPES + ["all"]),
    (["-d", "float,complex128"], ["'complex128'"] + TYPES),
    (["-o", "xor"], ["'xor'", "-o", "sum", "prod", "max", "min", "avg", "mulsum"]),
    (["--no-such-flag"], ["--no-such-flag", "--help"]),
    (["-q", "1"], ["-q", "--help"]),
    (["-b", "1M", "-e", "8"], ["-b 1048576", "-e 8"]),
    (["-b", "64K", "-e", "1K"], ["-b 65536", "-e 1024"]),
    (["-n", "abc"], ["--iters", "abc", "--help"]),
    (["-n", "0"], ["-n 0", "at least one"]),
    (["-n", "-3"], ["-n -3", "at least one"]),
    (["-b", "8x"], ["--minbytes", "x unit", "--help"]),
    (["-G", "-1"], ["-G -1", "0 or more"]),
]
# -G (CUDA graph capture) is refused before anything starts, saying why for the device the environment selects.
DEVICE_CASES = [
    (["-G", "2"], {"HOCCL_DEVICE": "sim"},
     ["-G 2", "graph capture needs a CUDA device; the simulated device does not capture graphs"]),
    (["-G", "1"], {"HOCCL_DEVICE": "none"}, ["-G 1", "graph capture needs a CUDA device", "has none"]),
]


def main(tools):
    if not tools:
        print(__doc__, file=sys.stderr)
        return 2
    # No launcher around: a tool that started anyway would run alone on threads, not wait for absent peers.
    env = {k: v for k, v in os.environ.items()
           if k not in ("HOCCL_RANK", "HOCCL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
                        "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS")}
    failures = []
    for tool in tools:
        name = os.path.basename(tool)
        for args, extra, words in [(a, {}, w) for a, w in CASES] + DEVICE_CASES:
            shown = " ".join([f"{k}={v}" for k, v in extra.items()] + [name] + args)
            try:
                r = subprocess.run([tool] + args, capture_output=True, text=True, timeout=30, env={**env, **extra})
            except subprocess.TimeoutExpired:
                failures.append(f"{shown}: still running after 30 s; a bad command line must fail at once")
                continue
            problems = []
            if r.returncode != 2:
                problems.append(f"exit code {r.returncode}, expected 2")
            if r.stdout.strip():
                problems.append(f"printed on stdout (a benchmark started?): {r.stdout.strip()[:200]!r}")
            if not r.stderr.startswith(name + ": "):
                problems.append(f"stderr does not start with '{name}: '")
            missing = [w for w in words if w not in r.stderr]
            if missing:
                problems.append(f"the message lacks {missing}")
            if problems:
                failures.append(f"{shown}: " + "; ".join(problems) + f"\n    stderr: {r.stderr.strip()!r}")
            else:
                print(f"ok   {shown}: {r.stderr.strip()}")
    for f in failures:
        print(f"FAIL {f}")
    print(f"{len(tools) * (len(CASES) + len(DEVICE_CASES)) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
