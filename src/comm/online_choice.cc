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
  if (blockLeft_ > 0) {  // inside a block of the runner-up or the loser
    running_ = 1 - winner_;
    agreeAfter_ = --blockLeft_ == 0;
  } else if (calls_ == kStartAfter || (nextCheck_ && calls_ >= nextCheck_)) {
    running_ = 1 - winner_;
    blockLeft_ = kBlock - 1;
    nextCheck_ = 0;
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
  double v[2] = {localEstimate(0), localEstimate(1)};
  agree(v, 2);
  estimate_[0] = v[0];
  estimate_[1] = v[1];
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
  const double a = estimate_[winner_], b = estimate_[1 - winner_];
  // A variant without a sample on any rank (0) cannot be judged: keep the winner.
  const bool challengerWins = a > 0 && b > 0 && b < a * (1 - kSwitchMargin);
  if (challengerWins && !confirming_) {
    // Confirm before switching: fresh samples of the winner (its next kBlock calls), then another block of the
    // challenger. A burst of slow calls in the winner's window (another process, the vCPUs moving) must not hand
    // the shape to a slower variant for a whole interval.
    confirming_ = true;
    samples_[0].clear();
    samples_[1].clear();
    nextCheck_ = calls_ + kBlock + 1;
    return;
  }
  confirming_ = false;
  if (challengerWins) winner_ = 1 - winner_;
  samples_[1 - winner_].clear();  // the next re-check judges the loser by its new block alone
  // A block of the loser costs kBlock (slow / fast - 1) calls' time, and the winner's first kSettleCalls calls after
  // it about as much again as their own (their slow start, which is why they are not timed): keep the sum under
  // kOverheadShare of the interval.
  const double fast = std::min(a, b), slow = std::max(a, b);
  const double excess = fast > 0 ? kBlock * (slow / fast - 1) + kSettleCalls : 0;
  const double interval = std::ceil(excess / kOverheadShare);
  nextCheck_ = calls_ + std::clamp<uint64_t>(static_cast<uint64_t>(std::min(interval, 1e9)), kMinInterval,
                                             kMaxInterval);
}

std::string OnlineChoice::describe() const {
  if (confirming_)
    return fmt::format(
        "variant {} measured faster than variant {} ({:.1f} us against {:.1f} us, the slowest rank's medians); it "
        "replaces it if it wins again after call {}",
        1 - winner_, winner_, estimate_[1 - winner_] * 1e6, estimate_[winner_] * 1e6, nextCheck_ + kBlock - 1);
  return fmt::format("variant {} wins ({:.1f} us against {:.1f} us, the slowest rank's medians), next re-check at "
                     "call {}",
                     winner_, estimate_[winner_] * 1e6, estimate_[1 - winner_] * 1e6, nextCheck_);
}

}  // namespace hoccl
