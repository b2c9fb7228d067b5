/*
 * The simulated device (sim_device.h). Every stream is a thread that runs its queue in order; a queued item that
 * throws records the stream's first error, which synchronize() reports. Waits queued on a stream (an event of another
 * stream, a host flag) follow base/wait.h and give up after HOCCL_TIMEOUT, recording an error instead of hanging.
 * Allocations are memfd mappings; a peer imports one by opening /proc/<pid>/fd/<fd> of the exporter (same user).
 */
#include "kernels/device/sim_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"
#include "base/params.h"
#include "base/wait.h"
#include "kernels/device/sim_kernels.h"

namespace hoccl::device {
namespace {

constexpr size_t kPage = 4096;

// One stream: a worker thread and its ordered queue.
class SimStream {
 public:
  SimStream() : worker_([this] { loop(); }) {}
  ~SimStream() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void push(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(std::move(fn));
      ++pushed_;
    }
    cv_.notify_all();
  }
  // Waits until everything pushed so far has run; returns the first error (then cleared), "" if none.
  std::string drain() {
    std::unique_lock<std::mutex> l(mu_);
    const uint64_t target = pushed_;
    idle_.wait(l, [&] { return done_ >= target; });
    std::string e;
    e.swap(error_);
    return e;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      std::function<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      l.unlock();
      std::string failure;
      try {
        fn();
      } catch (const std::exception& e) {
        failure = e.what();
      }
      l.lock();
      if (!failure.empty() && error_.empty()) error_ = failure;
      ++done_;
      idle_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> queue_;
  uint64_t pushed_ = 0, done_ = 0;
  bool stop_ = false;
  std::string error_;
  std::thread worker_;  // last: starts after the state above exists
};

// An event: the number of records and of records whose mark has run.
struct SimEvent {
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> reached{0};
};

// Waits on a stream's worker until ready() or HOCCL_TIMEOUT; throws naming `what`.
template <class Ready>
void waitOnStream(Ready&& ready, const std::string& what) {
  const auto timeout = std::chrono::seconds(params::TIMEOUT.get());
  const auto start = std::chrono::steady_clock::now();
  Backoff backoff(false);
  while (!ready()) {
    backoff.pause();
    if ((backoff.idle() & 255) == 0 && std::chrono::steady_clock::now() - start > timeout)
      throw Error(hocclInternalError,
                  fmt::format("simulated device: a stream waited {} s for {}; the work it waits for never completed "
                              "(raise HOCCL_TIMEOUT if it is only slow)",
                              timeout.count(), what));
  }
}

struct Allocation {
  size_t size = 0;    // bytes asked for
  size_t mapped = 0;  // bytes mapped
  int fd = -1;        // memfd of an own allocation, -1 for an imported one
  bool imported = false;
};

class SimDevice final : public Device {
 public:
  std::string name() const override { return "simulated device 0 (CPU, HOCCL_DEVICE=sim)"; }
  bool simulated() const override { return true; }
  int ordinal() const override { return 0; }
  bool hostAccessible() const override { return true; }

  void* malloc(size_t bytes) override {
    const size_t mapped = (bytes + kPage - 1) / kPage * kPage + (bytes == 0 ? kPage : 0);
    int fd = memfd_create("hoccl-simdev", MFD_CLOEXEC);
    if (fd < 0) throwSystemError("simulated device: memfd_create for a device allocation", errno);
    if (ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
      const int err = errno;
      close(fd);
      throwSystemError(fmt::format("simulated device: cannot size a device allocation of {} bytes", bytes), err);
    }
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(fd);
      throwSystemError(fmt::format("simulated device: cannot map a device allocation of {} bytes", bytes), err);
    }
    std::lock_guard<std::mutex> l(mu_);
    allocs_[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, mapped, fd, false};
    return p;
  }

  void free(void* ptr) override {
    if (!ptr) return;
    Allocation a;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = allocs_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == allocs_.end() || it->second.imported)
        throwInvalidArgument(
            fmt::format("simulated device: free of {}, which is not the start of a device "
                        "allocation of this process",
                        ptr));
      a = it->second;
      allocs_.erase(it);
    }
    munmap(ptr, a.mapped);
    close(a.fd);
  }

  bool owns(const void* ptr) const override {
    if (!ptr) return false;
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> l(mu_);
    auto it = allocs_.upper_bound(addr);
    if (it == allocs_.begin()) return false;
    --it;
    return addr < it->first + std::max<size_t>(it->second.size, 1);
  }

  void memcpy(void* dst, const void* src, size_t bytes) override {
    synchronize(nullptr);
    if (bytes) std::memcpy(dst, src, bytes);
  }

  Stream createStream() override {
    auto s = std::make_unique<SimStream>();
    Stream h = s.get();
    std::lock_guard<std::mutex> l(mu_);
    streams_[h] = std::move(s);
    return h;
  }

  void destroyStream(Stream stream) override {
    std::unique_ptr<SimStream> s;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = streams_.find(stream);
      if (it == streams_.end())
        throwInvalidArgument(fmt::format("simulated device: stream {} is not a live stream", stream));
      s = std::move(it->second);
      streams_.erase(it);
    }
    s->drain();
  }

  bool validStream(Stream stream) const override {
    if (!stream) return true;
    std::lock_guard<std::mutex> l(mu_);
    return streams_.count(stream) > 0;
  }

  void synchronize(Stream stream) override {
    const std::string e = get(stream).drain();
    if (!e.empty()) throw Error(hocclUnhandledCudaError, "simulated device: an operation on the stream failed: " + e);
  }

  Event createEvent() override { return new SimEvent(); }
  void destroyEvent(Event event) override { delete static_cast<SimEvent*>(event); }
  void record(Event event, Stream stream) override {
    auto* e = static_cast<SimEvent*>(event);
    const uint64_t mark = ++e->recorded;
    get(stream).push([e, mark] {
      uint64_t seen = e->reached.load();
      while (seen < mark && !e->reached.compare_exchange_weak(seen, mark)) {
      }
    });
  }
  bool query(Event event) override {
    auto* e = static_cast<SimEvent*>(event);
    return e->reached.load() >= e->recorded.load();
  }
  void streamWaitEvent(Stream stream, Event event) override {
    auto* e = static_cast<SimEvent*>(event);
    const uint64_t mark = e->recorded.load();
    get(stream).push([e, mark] { waitOnStream([&] { return e->reached.load() >= mark; }, "an event"); });
  }

  void launchHostFunc(Stream stream, std::function<void()> fn) override { get(stream).push(std::move(fn)); }
  void streamWaitFlag(Stream stream, const uint32_t* flag, uint32_t value) override {
    get(stream).push([flag, value] {
      waitOnStream([&] { return __atomic_load_n(flag, __ATOMIC_ACQUIRE) >= value; },
                   fmt::format("a flag to reach {}", value));
    });
  }
  uint32_t* allocFlag() override { return new uint32_t(0); }
  void freeFlag(uint32_t* flag) override { delete flag; }

  void launchCopy(Stream stream, void* dst, const void* src, size_t bytes) override {
    get(stream).push([=] { kernels::sim::copy(dst, src, bytes); });
  }
  void launchReduce(Stream stream, void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt,
                    kernels::BinOp op) override {
    get(stream).push([=] { kernels::sim::reduce(dst, a, b, n, dt, op); });
  }
  void launchScale(Stream stream, void* dst, const void* src, size_t n, hocclDataType_t dt,
                   const void* scalar) override {
    uint64_t value = 0;  // read before the call returns, as documented
    std::memcpy(&value, scalar, kernels::typeSize(dt));
    get(stream).push([=] { kernels::sim::scale(dst, src, n, dt, &value); });
  }
  void launchDivide(Stream stream, void* data, size_t n, hocclDataType_t dt, int divisor) override {
    get(stream).push([=] { kernels::sim::divide(data, n, dt, divisor); });
  }

  IpcHandle exportHandle(const void* ptr) override {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> l(mu_);
    auto it = allocs_.upper_bound(addr);
    if (it != allocs_.begin()) --it;
    if (it == allocs_.end() || it->second.imported || addr < it->first ||
        addr >= it->first + std::max<size_t>(it->second.size, 1))
      throwInvalidArgument(fmt::format("simulated device: {} is not in a device allocation of this process", ptr));
    IpcHandle h;
    const int pid = getpid(), fd = it->second.fd;
    std::memcpy(h.bytes, &pid, sizeof pid);
    std::memcpy(h.bytes + sizeof pid, &fd, sizeof fd);
    h.size = it->second.mapped;
    h.offset = addr - it->first;
    return h;
  }

  void* importHandle(const IpcHandle& handle) override {
    int pid = 0, fd = 0;
    std::memcpy(&pid, handle.bytes, sizeof pid);
    std::memcpy(&fd, handle.bytes + sizeof pid, sizeof fd);
    const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
    const int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (local < 0) throwSystemError("simulated device: cannot open a peer's device allocation at " + path, errno);
    void* p = mmap(nullptr, handle.size, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
    const int err = errno;
    close(local);
    if (p == MAP_FAILED) throwSystemError("simulated device: cannot map a peer's device allocation " + path, err);
    std::lock_guard<std::mutex> l(mu_);
    allocs_[reinterpret_cast<uintptr_t>(p)] = Allocation{handle.size, handle.size, -1, true};
    return static_cast<char*>(p) + handle.offset;
  }

  void closeHandle(void* ptr) override {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    Allocation a;
    uintptr_t base = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = allocs_.upper_bound(addr);
      if (it == allocs_.begin() || !(--it)->second.imported || addr >= it->first + it->second.mapped)
        throwInvalidArgument(fmt::format("simulated device: {} is not a mapped peer allocation", ptr));
      base = it->first;
      a = it->second;
      allocs_.erase(it);
    }
    munmap(reinterpret_cast<void*>(base), a.mapped);
  }

  ~SimDevice() override {
    // Streams first (their threads may still touch memory); allocations are the process's and go with it.
    std::map<Stream, std::unique_ptr<SimStream>> streams;
    {
      std::lock_guard<std::mutex> l(mu_);
      streams.swap(streams_);
    }
    streams.clear();
  }

 private:
  // The stream behind a handle (null: the default stream, made on first use).
  SimStream& get(Stream stream) {
    std::lock_guard<std::mutex> l(mu_);
    if (!stream) {
      if (!defaultStream_) defaultStream_ = std::make_unique<SimStream>();
      return *defaultStream_;
    }
    auto it = streams_.find(stream);
    if (it == streams_.end())
      throwInvalidArgument(
          fmt::format("simulated device: stream {} is not a live stream (destroyed, or not "
                      "made by hocclStreamCreate)",
                      stream));
    return *it->second;
  }

  mutable std::mutex mu_;
  std::map<uintptr_t, Allocation> allocs_;
  std::map<Stream, std::unique_ptr<SimStream>> streams_;
  std::unique_ptr<SimStream> defaultStream_;
};

}  // namespace

std::unique_ptr<Device> makeSimDevice() { return std::make_unique<SimDevice>(); }

}  // namespace hoccl::device
