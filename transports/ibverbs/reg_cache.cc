// The registration cache (see reg_cache.h).
#include "transports/ibverbs/reg_cache.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::transport::ibverbs {

RegCache::Lease& RegCache::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    reset();
    cache_ = o.cache_;
    entry_ = o.entry_;
    o.cache_ = nullptr;
    o.entry_ = nullptr;
  }
  return *this;
}

void RegCache::Lease::reset() {
  if (cache_ && entry_) cache_->release(entry_);
  cache_ = nullptr;
  entry_ = nullptr;
}

void* RegCache::Lease::handle() const { return entry_ ? entry_->handle : nullptr; }
uintptr_t RegCache::Lease::base() const { return entry_ ? entry_->base : 0; }
size_t RegCache::Lease::length() const { return entry_ ? entry_->len : 0; }

RegCache::RegCache(RegisterFn reg, DeregisterFn dereg, size_t maxEntries, size_t pageBytes)
    : reg_(std::move(reg)), dereg_(std::move(dereg)), maxEntries_(std::max<size_t>(1, maxEntries)) {
  if (pageBytes == 0 || (pageBytes & (pageBytes - 1)))
    throwInternalError(fmt::format("ibverbs: registration cache page size {} is not a power of two", pageBytes));
  pageMask_ = ~(static_cast<uintptr_t>(pageBytes) - 1);
}

RegCache::~RegCache() {
  for (Entry& e : entries_) dereg_(e.handle);
}

RegCache::Lease RegCache::acquire(const void* addr, size_t len) {
  if (!addr || len == 0)
    throwInternalError(fmt::format("ibverbs: registration of {} bytes at {}", len, fmt::ptr(addr)));
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  uintptr_t lo = a & pageMask_;
  uintptr_t hi = (a + len + ~pageMask_) & pageMask_;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->superseded || it->base > lo || it->base + it->len < hi) continue;
    ++it->refs;
    ++hits_;
    entries_.splice(entries_.begin(), entries_, it);  // most recently used
    return Lease(this, &entries_.front());
  }
  // A new registration covering the request and everything it overlaps.
  for (bool grew = true; grew;) {  // the union may reach further entries
    grew = false;
    for (const Entry& e : entries_) {
      if (e.superseded || e.base >= hi || e.base + e.len <= lo) continue;
      if (e.base < lo || e.base + e.len > hi) grew = true;
      lo = std::min(lo, e.base);
      hi = std::max(hi, e.base + e.len);
    }
  }
  void* handle = reg_(lo, hi - lo);  // may throw: nothing has changed yet
  ++registrations_;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (!it->superseded && it->base >= lo && it->base + it->len <= hi) {
      if (it->refs == 0) drop(it);
      else it->superseded = true;
    }
    it = next;
  }
  entries_.push_front(Entry{lo, hi - lo, handle, 1, false});
  Lease lease(this, &entries_.front());
  evict();
  return lease;
}

void RegCache::release(Entry* e) {
  if (e->refs == 0) return;
  if (--e->refs > 0) return;
  auto it = std::find_if(entries_.begin(), entries_.end(), [e](const Entry& x) { return &x == e; });
  if (it == entries_.end()) return;
  if (it->superseded) drop(it);
  else evict();
}

void RegCache::evict() {
  if (entries_.size() <= maxEntries_) return;
  for (auto it = entries_.end(); it != entries_.begin() && entries_.size() > maxEntries_;) {
    --it;
    if (it->refs != 0) continue;
    auto victim = it;
    it = std::next(it);  // stays valid: only victim is erased
    drop(victim);
  }
}

void RegCache::drop(std::list<Entry>::iterator it) {
  dereg_(it->handle);
  entries_.erase(it);
}

void RegCache::invalidate(const void* addr, size_t len) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t hi = lo + len;
  for (const Entry& e : entries_)
    if (e.base < hi && e.base + e.len > lo && e.refs > 0)
      throwInternalError(
          fmt::format("ibverbs: memory at {:#x} (+{} bytes) is being freed while a registration of it "
                      "is still in use ({} lease(s))",
                      lo, len, e.refs));
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->base < hi && it->base + it->len > lo) drop(it);
    it = next;
  }
}

}  // namespace hoccl::transport::ibverbs
