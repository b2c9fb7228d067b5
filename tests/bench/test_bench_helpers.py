"""The benchmark scripts' shared helpers (tools/bench/core_distance.py, tools/bench/perf_output.py) and the probe
they run (tools/bench/core_pingpong): labels at and around the thresholds, the perf rows' columns, size names, and a real probe.
Usage: python3 test_bench_helpers.py BUILD_DIR   (PYTHONPATH holds tools/bench)"""
import os
import subprocess
import sys

import core_distance
import perf_output


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)


def main():
    build = sys.argv[1]
    label = core_distance.label
    check(label(110, 120) == "near", "both probes below 200 ns: near")
    check(label(110, 520) == "mixed", "one near, one far probe: mixed")
    check(label(500, 480) == "far", "both probes above 300 ns: far")
    check(label(250, 250) == "mixed", "between the thresholds: mixed")
    check(label(199.9, 150) == "near" and label(200, 150) == "mixed", "the near threshold is strict")
    check(label(300.1, 400) == "far" and label(300, 400) == "mixed", "the far threshold is strict")
    check(label(None, None) == "near", "a machine of one CPU: near")
    check(label(150, 150, near_ns=100, far_ns=140) == "far", "thresholds passed in are used")

    text = "\n".join([
        "# nccl-tests style header: size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
        "        1024           256     float     sum      -1     2.50    0.41    0.41       0     1.75    0.59    0.59       0",
        "     1048576        262144     float     sum      -1    70.25   14.93   14.93       0    69.00   15.20   15.20       0",
        "        2048           512     float     sum      -1      N/A     N/A     N/A     N/A     3.00    0.68    0.68       0",
        "  # Avg bus bandwidth    : 7.67",
    ])
    check(perf_output.rows(text) == {1024: 2.5, 1048576: 70.25}, f"out-of-place rows: {perf_output.rows(text)}")
    check(perf_output.rows(text, in_place=True) == {1024: 1.75, 1048576: 69.0, 2048: 3.0},
          f"in-place rows: {perf_output.rows(text, True)}")

    sizes = [perf_output.human(b) for b in (8, 1023, 1024, 262144, 3 << 19, 16 << 20, 1 << 30)]
    check(sizes == ["8 B", "1023 B", "1 KiB", "256 KiB", "1.5 MiB", "16 MiB", "1 GiB"], f"size names: {sizes}")

    if len(os.sched_getaffinity(0)) >= 2:
        ns = core_distance.probe(build)
        check(ns is not None and 1 < ns < 1e6, f"core_pingpong between this process's first two CPUs read {ns} ns")
    else:
        check(core_distance.probe(build) is None, "one CPU: no probe")
        bad = subprocess.run([os.path.join(build, "tools", "bench", "core_pingpong"), "0", "100000"],
                             capture_output=True, text=True)
        check(bad.returncode == 2 and "cannot pin" in bad.stderr, f"an unknown CPU is refused: {bad.returncode} {bad.stderr}")
    print("bench helpers: ok")


if __name__ == "__main__":
    main()
