/// @file registrations.h
/// The buffers registered with one communicator (hocclCommRegister, the shim's ncclCommRegister and
/// ncclCommWindowRegister). A registration is a promise that the range stays allocated until it is deregistered; the
/// shm transport reads and writes a peer's registered buffer straight through a mapping when it lies in shared memory
/// (kernels/shared_mem.h) and every rank registered its buffer. For ordinary memory a registration only records
/// the range (hoccl's host paths need no pinning).
///
/// A registration that a collective is using (pinned) cannot be removed: hocclCommDeregister then fails with
/// hocclInvalidUsage and the registration stays.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace hoccl::kernels {

/// The registrations of one communicator. Thread-safe.
class Registrations {
 public:
  /// Registers [base, base+bytes); returns the handle. Overlapping registrations are allowed.
  void* add(const void* base, size_t bytes);
  /// Removes the registration `handle`. Throws hocclInvalidArgument when it is not one of this table's,
  /// hocclInvalidUsage (nothing removed) while a collective uses it.
  void remove(void* handle);
  /// True when one registration covers [ptr, ptr+bytes).
  bool covers(const void* ptr, size_t bytes) const;
  /// Number of live registrations.
  size_t size() const;

  /// Keeps the registrations covering a range from being removed while it lives (RAII).
  class Pin {
   public:
    Pin() = default;
    /// Pins every registration of `table` covering [ptr, ptr+bytes); covered() says whether there was one.
    Pin(Registrations& table, const void* ptr, size_t bytes);
    ~Pin();
    Pin(Pin&& o) noexcept : table_(o.table_), pinned_(std::move(o.pinned_)) { o.table_ = nullptr; }
    Pin& operator=(Pin&& o) noexcept;
    /// True when at least one registration covers the range.
    bool covered() const { return !pinned_.empty(); }

   private:
    void release();
    Registrations* table_ = nullptr;
    std::vector<void*> pinned_;
  };

 private:
  struct Entry {
    const char* base;
    size_t bytes;
    int pins = 0;
  };
  mutable std::mutex mu_;
  std::atomic<size_t> count_{0};                     // live registrations: size() without the lock
  std::map<void*, std::unique_ptr<Entry>> entries_;  // by handle (the entry's address)
};

}  // namespace hoccl::kernels
