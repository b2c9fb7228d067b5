/// @file channel_exchange.h
/// Shared by the transport unit tests (test_transports, test_ucx): driving channels the way the executor does, and a
/// many-message exchange with every peer that checks each byte and each sink piece.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "rank_runner.h"
#include "transports/transport.h"

namespace hoccl::test {

/// Progresses `chans` until nothing is pending, the way the executor does (spin, yield, then sleep on a channel);
/// throws std::runtime_error after `limit` with operations still pending.
void drive(const std::vector<transport::Channel*>& chans, std::chrono::seconds limit = std::chrono::seconds(30));

/// Deterministic random bytes of message `index` from rank `from` to rank `to`.
std::vector<unsigned char> payload(int from, int to, size_t index, size_t bytes);

/// The number of elements (of `granule` bytes) of message `i` of one direction, drawn from `gen` (both sides of the
/// direction call it with the same generator state, so they agree).
using MessageElements = std::function<size_t(int i, size_t granule, std::mt19937& gen)>;

/// Posts `count` messages to and from every peer of `channels` before any progress: element counts from `elements`,
/// a random granule of 1, 2, 4 or 8 bytes, a random mix of direct and sink receives. Then drives them and throws
/// std::runtime_error naming the message when a byte differs or a sink piece is not consecutive, empty or off the
/// granule.
void exchangeMany(const std::map<int, std::unique_ptr<transport::Channel>>& channels, int rank, int count,
                  const MessageElements& elements, std::chrono::seconds limit);

/// What the receiver of a mismatched message saw (see exchangeMismatched).
struct MismatchOutcome {
  int code = 0;             ///< the hoccl::Error code the receiver's drive threw (0: none)
  std::string error;        ///< its message
  bool guardIntact = true;  ///< no byte past the posted receive was written
};

/// One side of a send of `sent` bytes against a receive of `posted` bytes on `ch`: rank 0 sends (and tolerates the
/// receiver giving up), rank 1 receives into a buffer with guard bytes after `posted` and reports what it saw.
MismatchOutcome exchangeMismatched(transport::Channel& ch, int rank, size_t sent, size_t posted);

/// One side of a message of `bytes` random bytes sent with call tag `sendTag` against a receive of the same size
/// posted with `recvTag` (transport::RecvTarget::tag), into a buffer (`sink` false) or through a sink: rank 0 sends,
/// rank 1 receives and reports what it saw; `intact` (when it saw no error) says the bytes arrived unchanged.
MismatchOutcome exchangeTagged(transport::Channel& ch, int rank, size_t bytes, transport::CallTag sendTag,
                               transport::CallTag recvTag, bool sink, bool* intact);
/// What is wrong with the receiver's side of exchangeTagged ("" when nothing): with `mismatch` it must have failed
/// with hocclInvalidUsage saying the message belongs to another call (naming `peer`, when given), else delivered the
/// bytes intact; either way nothing past its buffer.
std::string taggedProblems(const MismatchOutcome& seen, bool intact, bool mismatch, const std::string& peer);

/// One "[tag]" case on two ranks, each joined by `connect(rank)` (a state with `channels` by peer and a `boot` to
/// barrier on before it goes): exchangeTagged between them, then what is wrong ("" when nothing): the first rank's
/// error, or the receiver's side by taggedProblems (with its error message).
template <class Connect>
std::string taggedCase(Connect&& connect, size_t bytes, transport::CallTag sendTag, transport::CallTag recvTag,
                       bool sink, bool mismatch, const std::string& peer) {
  MismatchOutcome seen;
  bool intact = false;
  const std::string error = firstError(runThreads(2, [&](int r) {
    auto st = connect(r);
    bool mine = false;
    MismatchOutcome out = exchangeTagged(*st.channels.at(1 - r), r, bytes, sendTag, recvTag, sink, &mine);
    if (r == 1) {
      seen = out;
      intact = mine;
    }
    st.boot->barrier();  // nobody tears down while its peer still reads
  }));
  if (!error.empty()) return "a rank failed: " + error;
  const std::string problems = taggedProblems(seen, intact, mismatch, peer);
  return problems.empty() ? problems : problems + " (the receiver's error: " + seen.error + ")";
}

}  // namespace hoccl::test
