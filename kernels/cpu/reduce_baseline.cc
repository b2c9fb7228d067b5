// The CPU reduction loops for the baseline instruction set (see reduce_loops.inc).
#include <cstdint>
#include <cstring>

#include "kernels/cpu/reduce_isa.h"
#include "kernels/reduce_ops.h"

namespace hoccl::kernels::baseline {
#include "kernels/cpu/reduce_loops.inc"
}  // namespace hoccl::kernels::baseline
