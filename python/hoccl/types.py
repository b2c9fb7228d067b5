"""hoccl's data types and reduction operations (the values of hocclDataType_t and hocclRedOp_t)."""

import enum

__all__ = ["DataType", "ReduceOp", "PreMulSum", "premul_sum", "SPLIT_NOCOLOR"]

#: The color that leaves a rank out of Communicator.split (it gets None).
SPLIT_NOCOLOR = -1


class DataType(enum.IntEnum):
    """hocclDataType_t. The package derives it from the buffer; it is listed for messages and introspection."""
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8_E4M3 = 10  # torch.float8_e4m3fn: no infinities, saturates at +-448
    FLOAT8_E5M2 = 11

    @property
    def itemsize(self):
        """Bytes per element."""
        return _ITEMSIZE[self]


_ITEMSIZE = {DataType.INT8: 1, DataType.UINT8: 1, DataType.INT32: 4, DataType.UINT32: 4, DataType.INT64: 8,
             DataType.UINT64: 8, DataType.FLOAT16: 2, DataType.FLOAT32: 4, DataType.FLOAT64: 8,
             DataType.BFLOAT16: 2, DataType.FLOAT8_E4M3: 1, DataType.FLOAT8_E5M2: 1}


class ReduceOp(enum.IntEnum):
    """hocclRedOp_t. Collectives also take the names as strings ("sum", "prod", "min", "max", "avg")."""
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class PreMulSum:
    """The PreMulSum reduction: the sum of every rank's input multiplied by `scalar` first (NCCL's ncclPreMulSum).

    The scalar is converted to the buffer's data type; the op is created on the communicator for the call and
    destroyed after it (after the group, inside Communicator.group()).
    """

    def __init__(self, scalar):
        if isinstance(scalar, bool) or not isinstance(scalar, (int, float)):
            raise TypeError(f"premul_sum: the scalar must be an int or a float, not {type(scalar).__name__}")
        self.scalar = scalar

    def __repr__(self):
        return f"hoccl.premul_sum({self.scalar!r})"


def premul_sum(scalar):
    """The PreMulSum reduction op with the given scalar (see PreMulSum)."""
    return PreMulSum(scalar)


def parse_op(op):
    """ReduceOp or PreMulSum from what a caller passed (ReduceOp, its int value, its name, or a PreMulSum)."""
    if isinstance(op, PreMulSum):
        return op
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        try:
            return ReduceOp[op.upper()]
        except KeyError:
            raise ValueError(f"unknown reduction op {op!r}: use one of sum, prod, min, max, avg or "
                             "hoccl.premul_sum(scalar)") from None
    if isinstance(op, int) and not isinstance(op, bool):
        try:
            return ReduceOp(op)
        except ValueError:
            raise ValueError(f"unknown reduction op {op}: use one of {[int(o) for o in ReduceOp]} or "
                             "hoccl.premul_sum(scalar)") from None
    raise TypeError(f"op must be a hoccl.ReduceOp, a name such as 'sum', or hoccl.premul_sum(scalar); got "
                    f"{type(op).__name__}")


def _fp8_table(exp_bits, man_bits, bias, has_inf):
    """(value, code) of every finite non-negative fp8 code of the format, for rounding to the nearest."""
    table = []
    for code in range(1 << (exp_bits + man_bits)):
        e, m = code >> man_bits, code & ((1 << man_bits) - 1)
        top = (1 << exp_bits) - 1
        if has_inf and e == top:
            continue  # e5m2: inf and NaN
        if not has_inf and e == top and m == (1 << man_bits) - 1:
            continue  # e4m3fn: NaN
        value = (m / (1 << man_bits)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        table.append((value, code))
    return table


_FP8 = {DataType.FLOAT8_E4M3: _fp8_table(4, 3, 7, False), DataType.FLOAT8_E5M2: _fp8_table(5, 2, 15, True)}
_INT_RANGES = {DataType.INT8: ("b", -2**7, 2**7 - 1), DataType.UINT8: ("B", 0, 2**8 - 1),
               DataType.INT32: ("i", -2**31, 2**31 - 1), DataType.UINT32: ("I", 0, 2**32 - 1),
               DataType.INT64: ("q", -2**63, 2**63 - 1), DataType.UINT64: ("Q", 0, 2**64 - 1)}


def encode_scalar(scalar, dtype):
    """The bytes of scalar in hoccl data type dtype (PreMulSum's host-immediate scalar): integers exactly (a value
    out of range or not integral is refused), floats rounded to the nearest representable value."""
    import math
    import struct
    dtype = DataType(dtype)
    if dtype in _INT_RANGES:
        fmt, lo, hi = _INT_RANGES[dtype]
        if isinstance(scalar, float) and not scalar.is_integer():
            raise ValueError(f"premul_sum scalar {scalar} is not an integer; the buffers are {dtype.name.lower()}")
        value = int(scalar)
        if not lo <= value <= hi:
            raise ValueError(f"premul_sum scalar {value} does not fit {dtype.name.lower()} ({lo}..{hi})")
        return struct.pack("=" + fmt, value)
    x = float(scalar)
    if dtype == DataType.FLOAT64:
        return struct.pack("=d", x)
    if dtype == DataType.FLOAT32:
        return struct.pack("=f", x)
    if dtype == DataType.FLOAT16:
        return struct.pack("=e", x)
    if dtype == DataType.BFLOAT16:
        bits = struct.unpack("=I", struct.pack("=f", x))[0]
        if math.isnan(x):
            return struct.pack("=H", (bits >> 16) | 0x40)
        bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
        return struct.pack("=H", (bits >> 16) & 0xFFFF)
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        raise ValueError(f"premul_sum scalar is NaN; {dtype.name.lower()} scalars must be numbers")
    a = abs(x)
    best = min(_FP8[dtype], key=lambda vc: (abs(vc[0] - a), vc[1] & 1))  # nearest, ties to the even code
    return bytes([sign | best[1]])
