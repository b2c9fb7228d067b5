"""Reading the perf tools' output (nccl-tests style rows) and naming sizes, for the benchmark scripts beside this
file."""


def rows(output, in_place=False):
    """size -> time in microseconds from nccl-tests style rows: the out-of-place time (column 5), or with in_place the
    in-place one (column 9). Comment lines and rows whose time is not a number are skipped. The printed bandwidths
    are rounded to two decimals, too coarse for small messages, so callers recompute bandwidths from the times."""
    out = {}
    column = 9 if in_place else 5
    for line in output.splitlines():
        if line.lstrip().startswith("#"):
            continue
        cols = line.split()
        if len(cols) > column and cols[0].isdigit():
            try:
                out[int(cols[0])] = float(cols[column])
            except ValueError:
                pass
    return out


def human(size):
    """A size in bytes as the tables print it: "8 B", "256 KiB", "16 MiB", "1 GiB"."""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div:
            return f"{size / div:g} {unit}"
    return f"{size} B"
