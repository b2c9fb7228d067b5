"""Reading the perf tools' output (nccl-tests style rows), and naming and reading sizes, for the benchmark scripts
beside this file."""


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


def parse_size(text):
    """A size as the scripts take it ("256K", "1M", "2G", "64KB" or plain bytes) in bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * units[text[-1]]) if text and text[-1] in units else int(text)
