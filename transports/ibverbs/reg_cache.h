/// @file reg_cache.h
/// A cache of memory registrations keyed by address range (pure: the registering and deregistering functions are
/// given, so tests count calls without a device; the transport passes ibv_reg_mr / ibv_dereg_mr).
///
/// acquire(addr, len) returns a Lease on a registration covering the page-aligned range: an existing entry that
/// contains it (its reference count goes up), else a new registration. A new registration covers the union of the
/// request and every entry it overlaps, so that later requests anywhere in the union hit one entry; the overlapped
/// entries are deregistered at once when unreferenced, else as soon as their last lease goes. Entries without
/// leases stay registered for reuse, in least-recently-used order, until there are more than `maxEntries`, when the
/// least recently used unreferenced ones are deregistered. Referenced entries are never deregistered; the limit may
/// be exceeded while more than `maxEntries` are in use.
///
/// A cached registration pins the pages it was made for: when memory is returned to the system, its owner must call
/// invalidate() first (a registration that outlived its memory would silently point at the old pages).
/// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>

namespace hoccl::transport::ibverbs {

/// The registration cache (see the file comment).
class RegCache {
 public:
  /// Registers [base, base + len) and returns an opaque handle (an ibv_mr*); throws hoccl::Error on failure.
  using RegisterFn = std::function<void*(uintptr_t base, size_t len)>;
  /// Deregisters a handle; must not throw.
  using DeregisterFn = std::function<void(void* handle)>;

  struct Entry;

  /// A use of a registration; the entry stays registered while a lease holds it. Move-only.
  class Lease {
   public:
    Lease() = default;
    ~Lease() { reset(); }
    Lease(Lease&& o) noexcept : cache_(o.cache_), entry_(o.entry_) { o.cache_ = nullptr, o.entry_ = nullptr; }
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    /// Gives the lease back (the entry stays cached).
    void reset();
    /// The registration's handle (null for an empty lease).
    void* handle() const;
    /// First byte the registration covers.
    uintptr_t base() const;
    /// Bytes it covers.
    size_t length() const;
    /// Whether this lease holds an entry.
    explicit operator bool() const { return entry_ != nullptr; }

   private:
    friend class RegCache;
    Lease(RegCache* c, Entry* e) : cache_(c), entry_(e) {}
    RegCache* cache_ = nullptr;
    Entry* entry_ = nullptr;
  };

  /// One registration.
  struct Entry {
    uintptr_t base = 0;       ///< page-aligned first byte
    size_t len = 0;           ///< page-aligned length
    void* handle = nullptr;   ///< what RegisterFn returned
    unsigned refs = 0;        ///< leases held
    bool superseded = false;  ///< a larger entry replaced it; deregistered when its last lease goes
  };

  /// `maxEntries` >= 1 unreferenced-or-not entries are kept before eviction; `pageBytes` is a power of two.
  RegCache(RegisterFn reg, DeregisterFn dereg, size_t maxEntries, size_t pageBytes = 4096);
  /// Deregisters every entry (leases must be gone by then).
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  /// A lease on a registration covering [addr, addr + len); len > 0. Throws what RegisterFn throws (nothing changed).
  Lease acquire(const void* addr, size_t len);
  /// The owner is about to free [addr, addr + len): deregisters every unreferenced entry overlapping it. An
  /// overlapping entry still leased is a hocclInternalError (its user would write to freed memory).
  void invalidate(const void* addr, size_t len);

  /// Entries currently registered.
  size_t entries() const { return entries_.size(); }
  /// Registrations made so far (RegisterFn calls that succeeded).
  uint64_t registrations() const { return registrations_; }
  /// Cache hits so far.
  uint64_t hits() const { return hits_; }

 private:
  void release(Entry* e);
  void evict();
  void drop(std::list<Entry>::iterator it);

  RegisterFn reg_;
  DeregisterFn dereg_;
  size_t maxEntries_;
  uintptr_t pageMask_;
  std::list<Entry> entries_;  // most recently used first
  uint64_t registrations_ = 0;
  uint64_t hits_ = 0;
};

}  // namespace hoccl::transport::ibverbs
