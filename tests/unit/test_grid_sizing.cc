// Grid sizing to the device (kernels/device/elementwise.h's blocksForDevice, used by the CUDA kernels' launches):
// never more blocks than fill the device once, never more than the elements need, at least one; an unknown device
// keeps the element-sized grid. Every element is still covered: the grid-stride split is checked by
// test_device_kernels for any grid.
#include <catch2/catch.hpp>

#include "kernels/device/elementwise.h"

namespace ew = hoccl::kernels::elementwise;

TEST_CASE("grid sizing: the grid fills the device once at most", "[kernels]") {
  // H100 SXM: 132 multiprocessors of 2048 threads: 4 blocks of 512 each.
  CHECK(ew::blocksForDevice(size_t(1) << 30, 132, 2048) == 528);
  CHECK(ew::blocksForDevice(size_t(1) << 30, 108, 2048) == 432);  // A100
  CHECK(ew::blocksForDevice(size_t(1) << 30, 84, 1536) == 252);   // 1536 threads: 3 blocks per multiprocessor
  CHECK(ew::blocksForDevice(size_t(1) << 30, 10, 256) == 10);     // fewer threads than a block: one each
  // Small launches: what the elements need.
  CHECK(ew::blocksForDevice(0, 132, 2048) == 1);
  CHECK(ew::blocksForDevice(1, 132, 2048) == 1);
  CHECK(ew::blocksForDevice(513, 132, 2048) == 2);
  CHECK(ew::blocksForDevice(528 * 512, 132, 2048) == 528);
  CHECK(ew::blocksForDevice(528 * 512 + 1, 132, 2048) == 528);
  // Unknown device: the element-sized grid, capped as before.
  CHECK(ew::blocksForDevice(size_t(1) << 30, 0, 0) == ew::blocksFor(size_t(1) << 30));
  CHECK(ew::blocksForDevice(size_t(1) << 40, -1, 2048) == unsigned(ew::kMaxBlocks));
}
