/// @file perf.h
/// The shared driver of the nccl-tests-compatible perf tools. Each tool (one small file per collective) describes
/// its collective with a CollTest table of callbacks and calls perfMain(); the driver does everything else: command
/// line, ranks (processes under hoccl-run, threads with -t, or both), buffers, data generation, timing, the
/// reference check, the nccl-tests table and the JSON report. Only the public API (<hoccl/hoccl.h>) is used.
#pragma once

#include <hoccl/hoccl.h>

#include <cstddef>
#include <vector>

namespace hoccl_perf {

/// Element counts of one test size, as nccl-tests' getCollByteCount computes them (all in elements).
struct Counts {
  size_t send = 0;               ///< elements in each rank's send buffer
  size_t recv = 0;               ///< elements in each rank's receive buffer
  size_t param = 0;              ///< the count argument passed to the collective (the table's "count" column)
  size_t sendInplaceOffset = 0;  ///< in-place: send buffer = recvbuff + sendInplaceOffset * rank
  size_t recvInplaceOffset = 0;  ///< in-place: receive buffer = recvbuff + recvInplaceOffset * rank
};

/// One block of a rank's expected output: `length` elements at `outOffset` equal either rank `srcRank`'s input
/// from `inOffset` on, or (srcRank == kReduceAll) the reduction over every rank's input from `inOffset` on.
struct Block {
  size_t outOffset;  ///< first element of the block in the receive buffer
  size_t length;     ///< elements in the block
  int srcRank;       ///< the rank whose input is copied here, or kReduceAll
  size_t inOffset;   ///< first element in the source input(s)
};

/// Block::srcRank value meaning "reduction over all ranks".
constexpr int kReduceAll = -1;

/// Arguments of one call of the collective under test.
struct CallArgs {
  const void* send;      ///< send buffer (already offset for in-place and misalignment)
  void* recv;            ///< receive buffer
  size_t count;          ///< Counts::param
  hocclDataType_t type;  ///< element type
  hocclRedOp_t op;       ///< reduction (built-in or PreMulSum), ignored when the collective has none
  int root;              ///< root rank, ignored when the collective has none
  int rank;              ///< caller's rank
  int nranks;            ///< ranks in the communicator
  hocclComm_t comm;      ///< communicator
  hocclStream_t stream;  ///< the rank's stream (device buffers), else NULL
};

/// The table of callbacks describing one collective (in the manner of nccl-tests' testColl).
struct CollTest {
  const char* name;  ///< tool name, e.g. "all_reduce_perf"
  bool hasOp;        ///< takes a reduction operation (else redop prints "none" and -o is ignored)
  bool hasRoot;      ///< takes a root (else root prints -1 and -r is ignored)
  /// Counts for `count` = size / element size elements with `nranks` ranks.
  Counts (*counts)(size_t count, size_t eltSize, int nranks);
  /// Bus-bandwidth factor for nranks (algbw x factor = busbw).
  double (*busFactor)(int nranks);
  /// Bytes that algbw is computed from, given the param count and element size.
  double (*algBytes)(size_t paramCount, size_t eltSize, int nranks);
  /// Appends the expected output blocks of `rank`; none when the rank's output is undefined (non-root of reduce).
  void (*expected)(std::vector<Block>& out, size_t paramCount, int rank, int nranks, int root);
  /// Issues the collective once.
  hocclResult_t (*run)(const CallArgs& a);
};

/// Runs the tool: parses argv, creates the ranks and runs every test. Returns the process exit code.
int perfMain(int argc, char** argv, const CollTest& test);

/// Per-rank element count of the n-way collectives: count / nranks rounded down to a 16-byte multiple.
inline size_t perRankCount(size_t count, size_t eltSize, int nranks) {
  size_t base = count / static_cast<size_t>(nranks);
  size_t align = eltSize < 16 ? 16 / eltSize : 1;
  return base - base % align;
}

}  // namespace hoccl_perf
