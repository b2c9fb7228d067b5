// The online choice between two variants of one call shape (see online_choice.h for the protocol and why).
#include "comm/online_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hoccl {

bool sameBitsEveryVariant(Coll coll, hocclDataType_t dtype, hocclRedOp_t op, int nranks) {
  switch (coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
    case Coll::ReduceScatter: break;
    default: return true;  // data movement only
  }
  if (op == hocclMax || op == hocclMin) return true;
  if (op != hocclSum && op != hocclProd) return false;
  switch (dtype) {
    case hocclInt8:
    case hocclUint8:
    case hocclInt32:
    case hocclUint32:
    case hocclInt64:
    case hocclUint64: return true;
    default: return nranks == 2;
  }
}

void OnlineChoice::beforeCall() {
  ++calls_;
  const int previous = running_;
  agreeAfter_ = false;
  if (blockLeft_ == 0 && (calls_ == kStartAfter || (nextCheck_ && calls_ >= nextCheck_))) {
    // A re-check (the first is the exploration): a block of every other variant in turn, or of the challenger alone
    // when it confirms a switch.
    queue_.clear();
    if (confirming_) queue_.push_back(challenger_);
    else
      for (int v = 0; v < variants_; ++v)
        if (v != winner_) queue_.push_back(v);
    blockLeft_ = kBlock;
    nextCheck_ = 0;
  }
  if (blockLeft_ > 0) {
    running_ = queue_.front();
    if (--blockLeft_ == 0) {
      queue_.erase(queue_.begin());
      if (queue_.empty()) agreeAfter_ = true;
      else blockLeft_ = kBlock;
    }
  } else {
    running_ = winner_;
  }
  run_ = running_ == previous ? run_ + 1 : 1;
  // Timed only in the second half of a run of one variant (see the file comment of online_choice.h).
  timed_ = run_ > kBlock / 2;
}

bool OnlineChoice::afterCall(double seconds, const Agree& agree) {
  if (timed_) record(running_, seconds);
  if (!agreeAfter_) return false;
  agreeAfter_ = false;
  double v[kMaxVariants] = {};
  for (int i = 0; i < variants_; ++i) v[i] = localEstimate(i);
  agree(v, variants_);
  for (int i = 0; i < variants_; ++i) estimate_[i] = v[i];
  ++agreements_;
  decide();
  return true;
}

void OnlineChoice::record(int variant, double seconds) {
  std::vector<double>& s = samples_[variant];
  if (s.size() == kWindow) s.erase(s.begin());
  s.push_back(seconds);
}

double OnlineChoice::localEstimate(int variant) const {
  std::vector<double> s = samples_[variant];
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

void OnlineChoice::decide() {
  // The fastest challenger that was timed (0: a variant without a sample on any rank, which cannot be judged).
  int best = -1;
  for (int v = 0; v < variants_; ++v)
    if (v != winner_ && estimate_[v] > 0 && (best < 0 || estimate_[v] < estimate_[best])) best = v;
  const double a = estimate_[winner_], b = best >= 0 ? estimate_[best] : 0;
  const bool challengerWins = a > 0 && b > 0 && b < a * (1 - kSwitchMargin);
  if (challengerWins && !confirming_) {
    // Confirm before switching: fresh samples of the winner (its next kBlock calls), then another block of the
    // challenger. A burst of slow calls in the winner's window (another process, the vCPUs moving) must not hand
    // the shape to a slower variant for a whole interval.
    confirming_ = true;
    challenger_ = best;
    for (auto& samples : samples_) samples.clear();
    nextCheck_ = calls_ + kBlock + 1;
    return;
  }
  confirming_ = false;
  if (challengerWins) winner_ = best;
  // The next re-check judges the others by their new blocks alone.
  for (int v = 0; v < variants_; ++v)
    if (v != winner_) samples_[v].clear();
  // A block of a slower variant costs kBlock (slow / fast - 1) calls' time, and the calls after it about
  // kSettleCalls calls' time more (their slow start, which is why they are not timed): keep the sum over the
  // re-check's blocks under kOverheadShare of the interval.
  const double w = estimate_[winner_];
  double excess = 0;
  for (int v = 0; v < variants_; ++v)
    if (v != winner_ && w > 0 && estimate_[v] > 0)
      excess += kBlock * (std::max(estimate_[v], w) / std::min(estimate_[v], w) - 1) + kSettleCalls;
  const double interval = std::ceil(excess / kOverheadShare);
  nextCheck_ = calls_ + std::clamp<uint64_t>(static_cast<uint64_t>(std::min(interval, 1e9)), kMinInterval,
                                             kMaxInterval);
}

std::string OnlineChoice::describe() const {
  const int other = confirming_ ? challenger_ : winner_ == 0 ? 1 : 0;
  std::string rest;  // a third variant's estimate
  for (int v = 0; v < variants_; ++v)
    if (v != winner_ && v != other) rest += fmt::format("; variant {}: {:.1f} us", v, estimate_[v] * 1e6);
  if (confirming_)
    return fmt::format(
        "variant {} measured faster than variant {} ({:.1f} us against {:.1f} us, the slowest rank's medians{}); it "
        "replaces it if it wins again after call {}",
        other, winner_, estimate_[other] * 1e6, estimate_[winner_] * 1e6, rest, nextCheck_ + kBlock - 1);
  return fmt::format("variant {} wins ({:.1f} us against {:.1f} us, the slowest rank's medians{}), next re-check at "
                     "call {}",
                     winner_, estimate_[winner_] * 1e6, estimate_[other] * 1e6, rest, nextCheck_);
}

}  // namespace hoccl
