/// @file health.h
/// The health of one communicator as every wait sees it: whether this process aborted it (hocclCommAbort, from any
/// thread) and the first failure any rank of the communicator reported (a dead, silent or aborted peer, learned
/// through the bootstrap's side channel or detected here). Waits call check() at their liveness interval; a healthy
/// communicator costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace hoccl {

/// Shared state of one communicator's health. Thread-safe.
class Health {
 public:
  /// Marks the communicator aborted by this process (hocclCommAbort).
  void abort() {
    aborted_.store(true, std::memory_order_release);
    raiseMirror();
  }
  /// True after abort().
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  /// Records a failure of the job (the first one wins; later ones are ignored): `message` names the culprit rank,
  /// its host and pid, and what happened to it.
  void fail(const std::string& message);
  /// True when a failure was recorded.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// The recorded failure ("" when none).
  std::string failure() const;
  /// Throws hocclInvalidUsage when aborted, hocclRemoteError quoting the failure when one was recorded; `who` (for
  /// example "comm 'x' rank 1/4 (pid 77)") and `what` (the operation) prefix the message.
  void check(const std::string& who, const std::string& what) const;
  /// From now on, an abort or a failure also sets *word to 1 (at once when one happened already), for waits that
  /// cannot call check(): a device kernel polls it (src/comm/one_shot.h). One word; it must outlive this Health's
  /// last abort() or fail(), or be withdrawn with mirrorInto(nullptr) first.
  void mirrorInto(uint32_t* word);

 private:
  void raiseMirror();
  std::atomic<bool> aborted_{false};
  std::atomic<uint32_t*> mirror_{nullptr};
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  std::string failure_;
};

}  // namespace hoccl
