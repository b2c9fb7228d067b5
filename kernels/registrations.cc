// The registrations of a communicator (see registrations.h): a small table by handle; lookups scan it (a
// communicator holds a handful of registrations: the frameworks register their pools' segments).
#include "kernels/registrations.h"

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::kernels {

void* Registrations::add(const void* base, size_t bytes) {
  auto e = std::make_unique<Entry>(Entry{static_cast<const char*>(base), bytes});
  void* handle = e.get();
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace(handle, std::move(e));
  count_.store(entries_.size(), std::memory_order_release);
  return handle;
}

void Registrations::remove(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end())
    throwInvalidArgument(fmt::format(
        "registration handle {} is not registered with this communicator (already deregistered, or made by another "
        "communicator)",
        handle));
  if (it->second->pins > 0)
    throwInvalidUsage(
        fmt::format("the buffer registered as {} ([{}, +{} bytes)) is in use by {} collective call(s) "
                    "in flight; it stays registered. Deregister it after those calls have returned",
                    handle, static_cast<const void*>(it->second->base), it->second->bytes, it->second->pins));
  entries_.erase(it);
  count_.store(entries_.size(), std::memory_order_release);
}

bool Registrations::covers(const void* ptr, size_t bytes) const {
  if (size() == 0) return false;
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [h, e] : entries_)
    if (p >= e->base && static_cast<size_t>(p - e->base) <= e->bytes && bytes <= e->bytes - (p - e->base)) return true;
  return false;
}

size_t Registrations::size() const { return count_.load(std::memory_order_acquire); }

Registrations::Pin::Pin(Registrations& table, const void* ptr, size_t bytes) : table_(&table) {
  const char* p = static_cast<const char*>(ptr);
  if (!p) return;
  std::lock_guard<std::mutex> lock(table.mu_);
  for (auto& [h, e] : table.entries_)
    if (p >= e->base && static_cast<size_t>(p - e->base) <= e->bytes && bytes <= e->bytes - (p - e->base)) {
      ++e->pins;
      pinned_.push_back(h);
    }
}

Registrations::Pin& Registrations::Pin::operator=(Pin&& o) noexcept {
  if (this != &o) {
    release();
    table_ = o.table_;
    pinned_ = std::move(o.pinned_);
    o.table_ = nullptr;
  }
  return *this;
}

void Registrations::Pin::release() {
  if (!table_) return;
  std::lock_guard<std::mutex> lock(table_->mu_);
  for (void* h : pinned_)
    if (auto it = table_->entries_.find(h); it != table_->entries_.end()) --it->second->pins;
  pinned_.clear();
  table_ = nullptr;
}

Registrations::Pin::~Pin() { release(); }

}  // namespace hoccl::kernels
