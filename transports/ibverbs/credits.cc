// Credit accounting of the ibverbs channel (see credits.h).
#include "transports/ibverbs/credits.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::transport::ibverbs {

SendCredits::SendCredits(uint32_t slots) : slots_(slots) {
  if (slots == 0) throwInternalError("ibverbs: a credit window of 0 slots");
}

uint32_t SendCredits::available() const {
  const uint64_t unconsumed = posted_ - consumed_;
  const uint64_t incomplete = posted_ - completed_;
  const uint64_t busy = std::max(unconsumed, incomplete);
  return busy >= slots_ ? 0 : static_cast<uint32_t>(slots_ - busy);
}

uint64_t SendCredits::post() {
  if (!canPost())
    throwInternalError(
        fmt::format("ibverbs: chunk posted without a credit ({} posted, {} consumed by the peer, {} "
                    "complete, {} slots)",
                    posted_, consumed_, completed_, slots_));
  return posted_++;
}

void SendCredits::localComplete() {
  if (completed_ >= posted_)
    throwInternalError(fmt::format("ibverbs: a write completion with no write outstanding ({} posted)", posted_));
  ++completed_;
}

void SendCredits::remoteConsumed(uint64_t total) {
  if (total < consumed_ || total > posted_)
    throwInternalError(
        fmt::format("ibverbs: the peer's consumed count {} is impossible (it was {}, {} chunks "
                    "posted); the peer's memory or protocol is corrupt",
                    total, consumed_, posted_));
  consumed_ = total;
}

CreditReturn::CreditReturn(uint32_t slots) : slots_(slots) {
  if (slots == 0) throwInternalError("ibverbs: a receive ring of 0 slots");
}

uint64_t CreditReturn::arrived() {
  if (arrived_ - consumed_ >= slots_)
    throwInternalError(
        fmt::format("ibverbs: the peer wrote chunk {} into a full ring ({} consumed, {} slots): it "
                    "had no credit",
                    arrived_, consumed_, slots_));
  return arrived_++;
}

void CreditReturn::consumed() {
  if (consumed_ >= arrived_)
    throwInternalError(fmt::format("ibverbs: consumed a chunk that did not arrive ({} arrived)", arrived_));
  ++consumed_;
}

uint64_t CreditReturn::startReturn() {
  inFlight_ = true;
  returned_ = consumed_;
  return returned_;
}

void CreditReturn::returnCompleted() { inFlight_ = false; }

}  // namespace hoccl::transport::ibverbs
