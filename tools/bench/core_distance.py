"""Near and far cores, for the benchmark scripts (compare-mpi, check-tuner).

The build machines' two vCPUs sit on cores that share a last-level cache ("near": a cache line's round trip between
them takes 100-120 ns) or on cores that do not ("far": 470-540 ns), and the hypervisor moves them between the two
every few seconds to minutes; nothing inside the machine can see it (hwloc reports one shared L3 either way). Every
transfer that hands cache lines from one core to the other (hoccl's shm slots, Open MPI's shared-memory fragments)
runs 2-7x slower on far cores (docs/performance.md, "Near and far cores"). A launch bracketed by two probes
(tools/bench/core_pingpong) is labelled with what they saw, so that a comparison uses launches of one state.
"""
import os
import subprocess

# A launch is near when both probes read below NEAR_NS, far when both read above FAR_NS, else mixed (the cores
# moved during the launch). The build machines read 100-120 ns and 470-540 ns; another machine may need others.
# A busy machine reads far or worse too (the probe's second thread waits for a core: 2,000-6,000 ns while a build
# runs), so the labels mean something only when nothing else runs, as the benchmarks ask anyway.
NEAR_NS = 200.0
FAR_NS = 300.0


def probe(build):
    """Nanoseconds of a cache line's round trip between the first two CPUs this process may run on (CPUs 0 and 1 on
    the build machines), or None when it may run on one CPU only."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    tool = os.path.join(build, "tools", "bench", "core_pingpong")
    out = subprocess.run([tool, str(cpus[0]), str(cpus[1])], check=True, text=True, capture_output=True).stdout
    return float(out.split()[0])


def label(before, after, near_ns=NEAR_NS, far_ns=FAR_NS):
    """"near", "far" or "mixed" for a launch whose probes read `before` and `after` (None: one CPU, near)."""
    if before is None or after is None:
        return "near"
    if max(before, after) < near_ns:
        return "near"
    return "far" if min(before, after) > far_ns else "mixed"


def labelled(build, run, near_ns=NEAR_NS, far_ns=FAR_NS):
    """(run(), its label): run bracketed by two probes."""
    before = probe(build)
    result = run()
    return result, label(before, probe(build), near_ns, far_ns)
