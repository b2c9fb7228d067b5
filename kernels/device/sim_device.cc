/*
 * The simulated device (sim_device.h). Every stream is a thread that runs its queue in order; a queued item that
 * throws records the stream's first error, which synchronize() reports. Waits queued on a stream (an event of another
 * stream, a host flag) follow base/wait.h and give up after HOCCL_TIMEOUT, recording an error instead of hanging.
 * Allocations are memfd mappings; a peer imports one by opening /proc/<pid>/fd/<fd> of the exporter (same user).
 *
 * Strict mode (HOCCL_SIM_HOST_ACCESS=0, the default) models a GPU's separate memory: every allocation is mapped
 * twice, once without any access (the address malloc returns, which the host, the user and hoccl see) and once read-
 * write (the "device view", private to this file). Copies and kernels translate their pointers to the device view
 * when they run, so they work as on a GPU; host code that reads or writes device memory directly faults (SIGSEGV),
 * as it would on a GPU. The kernels also refuse pageable host memory (a GPU kernel can read only device memory and
 * pinned, device-mapped host memory: mallocHost), and an access past the end of an allocation. With
 * HOCCL_SIM_HOST_ACCESS=1 both views are one read-write mapping (the host may touch device memory).
 *
 * Two CUDA calls wait for the whole device to go idle, which a stream waiting for a host flag (streamWaitFlag) holds
 * off until the host sets it: cuMemFree / cuMemFreeHost, and the first launch of a kernel under CUDA's lazy loading
 * (the default since CUDA 12.2: the launch loads the kernel, and loading waits for the device). Called by the thread
 * that sets the flag afterwards (hoccl's proxy), they deadlock on a GPU. The sim refuses them instead, at once, with
 * hoccl::Error: every stream tracks its queued flag waits until they have run, and free(), freeHost() and the launch of
 * a kernel not loaded yet throw, changing nothing, while any stream of the device has a queued wait whose flag is
 * still below its value (the work queued behind it waits too). Kernels (reduce per type and op, scale and divide per
 * type; copies need none) are all loaded when the sim is made, as the CUDA device preloads them; with
 * HOCCL_SIM_LAZY_LOADING=1 none is, and each is loaded by its first launch that finds no such wait.
 */
#include "kernels/device/sim_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
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
  // A flag wait queued on the stream whose flag is below its value (it holds `held`).
  struct UnmetWait {
    const uint32_t* flag;
    uint32_t value, held;
  };

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
  // Queues a wait until *flag >= value, tracked (unmetWait) from now until it has run.
  void pushFlagWait(const uint32_t* flag, uint32_t value) {
    {
      std::lock_guard<std::mutex> l(mu_);
      const uint64_t id = ++flagWaitIds_;
      flagWaits_[id] = {flag, value};
      queue_.push_back([this, id, flag, value] {
        struct Untrack {  // also when the wait gives up (throws)
          SimStream* s;
          uint64_t id;
          ~Untrack() {
            std::lock_guard<std::mutex> l(s->mu_);
            s->flagWaits_.erase(id);
          }
        } untrack{this, id};
        waitOnFlag(flag, value);
      });
      ++pushed_;
    }
    cv_.notify_all();
  }
  // The first flag wait queued here, not yet run, whose flag is still below its value (the stream is blocked there,
  // or will be when it gets there); none when every queued flag wait is met.
  std::optional<UnmetWait> unmetWait() const {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [id, w] : flagWaits_) {
      const uint32_t held = __atomic_load_n(w.first, __ATOMIC_ACQUIRE);
      if (held < w.second) return UnmetWait{w.first, w.second, held};
    }
    return std::nullopt;
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

  static void waitOnFlag(const uint32_t* flag, uint32_t value);

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> queue_;
  std::map<uint64_t, std::pair<const uint32_t*, uint32_t>> flagWaits_;  // queued flag waits in order: flag, value
  uint64_t flagWaitIds_ = 0;
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

void SimStream::waitOnFlag(const uint32_t* flag, uint32_t value) {
  waitOnStream([&] { return __atomic_load_n(flag, __ATOMIC_ACQUIRE) >= value; },
               fmt::format("a flag to reach {}", value));
}

struct Allocation {
  size_t size = 0;    // bytes asked for
  size_t mapped = 0;  // bytes mapped
  int fd = -1;        // memfd of an own allocation, -1 for an imported one
  bool imported = false;
  bool shareable = false;  // from mallocShareable: exportable as a file descriptor
  char* rw = nullptr;      // the device view (read-write); the same address as the allocation's when not strict
};

// Maps `bytes` of fd twice in strict mode (a no-access view for everybody, returned, and the read-write device view,
// in *rw), once read-write otherwise. Returns MAP_FAILED (errno set) on failure.
void* mapViews(int fd, size_t bytes, bool strict, char** rw) {
  void* dev = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (dev == MAP_FAILED) return MAP_FAILED;
  *rw = static_cast<char*>(dev);
  if (!strict) return dev;
  void* user = mmap(nullptr, bytes, PROT_NONE, MAP_SHARED, fd, 0);
  if (user == MAP_FAILED) {
    const int err = errno;
    munmap(dev, bytes);
    errno = err;
  }
  return user;
}

void unmapViews(void* user, const Allocation& a) {
  munmap(user, a.mapped);
  if (a.rw != user) munmap(a.rw, a.mapped);
}

class SimDevice final : public Device {
 public:
  SimDevice() {
    if (lazyLoading_) return;
    for (int t = 0; t < hocclNumTypes; ++t) {  // what the CUDA device's hocclCudaPreload loads
      const auto dt = static_cast<hocclDataType_t>(t);
      for (kernels::BinOp op : kAllOps) loaded_.insert(kernelKey(Kernel::Reduce, dt, op));
      loaded_.insert(kernelKey(Kernel::Scale, dt));
      loaded_.insert(kernelKey(Kernel::Divide, dt));
    }
  }

  std::string name() const override { return "simulated device 0 (CPU, HOCCL_DEVICE=sim)"; }
  bool simulated() const override { return true; }
  int ordinal() const override { return 0; }
  bool hostAccessible() const override { return !strict_; }

  void* malloc(size_t bytes) override { return allocate(bytes, false); }

  void* allocate(size_t bytes, bool shareable) {
    const size_t mapped = (bytes + kPage - 1) / kPage * kPage + (bytes == 0 ? kPage : 0);
    int fd = memfd_create("hoccl-simdev", MFD_CLOEXEC);
    if (fd < 0) throwSystemError("simulated device: memfd_create for a device allocation", errno);
    if (ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
      const int err = errno;
      close(fd);
      throwSystemError(fmt::format("simulated device: cannot size a device allocation of {} bytes", bytes), err);
    }
    char* rw = nullptr;
    void* p = mapViews(fd, mapped, strict_, &rw);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(fd);
      throwSystemError(fmt::format("simulated device: cannot map a device allocation of {} bytes", bytes), err);
    }
    std::lock_guard<std::mutex> l(mu_);
    allocs_[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, mapped, fd, false, shareable, rw};
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
      refuseWhileFlagWait(fmt::format("cuMemFree-like free of {}", ptr));
      a = it->second;
      allocs_.erase(it);
    }
    unmapViews(ptr, a);
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
    if (bytes) std::memcpy(view(dst, bytes, Access::Copy), view(src, bytes, Access::Copy), bytes);
  }

  void* mallocHost(size_t bytes) override {
    void* p = nullptr;
    const int err = posix_memalign(&p, kPage, std::max<size_t>(bytes, 1));
    if (err != 0) throwSystemError(fmt::format("simulated device: pinned host allocation of {} bytes", bytes), err);
    std::lock_guard<std::mutex> l(mu_);
    pinned_[reinterpret_cast<uintptr_t>(p)] = std::max<size_t>(bytes, 1);
    return p;
  }
  void freeHost(void* ptr) override {
    if (!ptr) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = pinned_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == pinned_.end())
        throwInvalidArgument(fmt::format("simulated device: freeHost of {}, which is not from mallocHost", ptr));
      refuseWhileFlagWait(fmt::format("cuMemFreeHost-like freeHost of {}", ptr));
      pinned_.erase(it);
    }
    ::free(ptr);
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
    get(stream).pushFlagWait(flag, value);
  }
  uint32_t* allocFlag() override { return new uint32_t(0); }
  void freeFlag(uint32_t* flag) override { delete flag; }

  void launchCopy(Stream stream, void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    void* d = view(dst, bytes, Access::Copy);
    const void* s = view(src, bytes, Access::Copy);
    get(stream).push([=] { kernels::sim::copy(d, s, bytes); });
  }
  void launchReduce(Stream stream, void* dst, const void* a, const void* b, size_t n, hocclDataType_t dt,
                    kernels::BinOp op) override {
    if (!n) return;
    const size_t bytes = n * kernels::typeSize(dt);
    void* d = view(dst, bytes, Access::Kernel);
    const void* x = view(a, bytes, Access::Kernel);
    const void* y = view(b, bytes, Access::Kernel);
    SimStream& q = get(stream);
    load(Kernel::Reduce, dt, op);
    q.push([=] { kernels::sim::reduce(d, x, y, n, dt, op); });
  }
  void launchScale(Stream stream, void* dst, const void* src, size_t n, hocclDataType_t dt,
                   const void* scalar) override {
    if (strict_ && owns(scalar))
      throwInvalidArgument(
          fmt::format("simulated device: the scalar of a scale kernel ({}) is device memory; the "
                      "kernel takes it from host memory (copy it to the host first)",
                      scalar));
    uint64_t value = 0;  // read before the call returns, as documented
    std::memcpy(&value, scalar, kernels::typeSize(dt));
    if (!n) return;
    const size_t bytes = n * kernels::typeSize(dt);
    void* d = view(dst, bytes, Access::Kernel);
    const void* s = view(src, bytes, Access::Kernel);
    SimStream& q = get(stream);
    load(Kernel::Scale, dt);
    q.push([=] { kernels::sim::scale(d, s, n, dt, &value); });
  }
  void launchDivide(Stream stream, void* data, size_t n, hocclDataType_t dt, int divisor) override {
    if (!n) return;
    void* d = view(data, n * kernels::typeSize(dt), Access::Kernel);
    SimStream& q = get(stream);
    load(Kernel::Divide, dt);
    q.push([=] { kernels::sim::divide(d, n, dt, divisor); });
  }

  void launchOneShotAllReduce(Stream stream, const kernels::one_shot::Args& args, hocclDataType_t dt,
                              kernels::BinOp op) override {
    if (!args.count) return;
    if (args.nranks < 2 || args.nranks > kernels::one_shot::kMaxRanks)
      throwInvalidArgument(fmt::format("simulated device: one-kernel all-reduce over {} ranks", args.nranks));
    const size_t bytes = args.count * kernels::typeSize(dt);
    if (bytes > kernels::one_shot::kSlotBytes)
      throwInvalidArgument(fmt::format("simulated device: one-kernel all-reduce of {} bytes, more than a slot ({})",
                                       bytes, kernels::one_shot::kSlotBytes));
    kernels::one_shot::Args a = args;  // every pointer as the device sees it
    a.in = view(args.in, bytes, Access::Kernel);
    a.out = view(args.out, bytes, Access::Kernel);
    for (int j = 0; j < args.nranks; ++j) a.areas[j] = view(args.areas[j], kernels::one_shot::kAreaBytes, Access::Kernel);
    a.status = view(args.status, kernels::one_shot::kStatusWords * sizeof(uint32_t), Access::Kernel);
    a.abort = view(const_cast<const uint32_t*>(args.abort), sizeof(uint32_t), Access::Kernel);
    get(stream).push([=] { kernels::sim::oneShotAllReduce(a, dt, op); });
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
    char* rw = nullptr;
    void* p = mapViews(local, handle.size, strict_, &rw);
    const int err = errno;
    close(local);
    if (p == MAP_FAILED) throwSystemError("simulated device: cannot map a peer's device allocation " + path, err);
    std::lock_guard<std::mutex> l(mu_);
    allocs_[reinterpret_cast<uintptr_t>(p)] = Allocation{handle.size, handle.size, -1, true, false, rw};
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
    unmapViews(reinterpret_cast<void*>(base), a);
  }

  // cuMem file descriptors, simulated: the memfd itself travels (dup'ed for the caller), and the importer maps it
  // as it would a legacy handle, after checking that the file is as large as the exporter said.
  bool fdHandles() const override { return true; }
  void* mallocShareable(size_t bytes) override { return allocate(bytes, true); }
  bool shareable(const void* ptr) const override {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> l(mu_);
    auto it = allocs_.upper_bound(addr);
    if (it == allocs_.begin()) return false;
    --it;
    return it->second.shareable && addr < it->first + std::max<size_t>(it->second.size, 1);
  }
  int exportFd(const void* ptr, IpcHandle* where) override {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> l(mu_);
    auto it = allocs_.upper_bound(addr);
    if (it != allocs_.begin()) --it;
    if (it == allocs_.end() || !it->second.shareable || addr < it->first ||
        addr >= it->first + std::max<size_t>(it->second.size, 1))
      throwInvalidArgument(
          fmt::format("simulated device: {} is not in a shareable device allocation of this process (exportFd "
                      "takes memory of mallocShareable, as cuMemExportToShareableHandle takes cuMemCreate's)",
                      ptr));
    const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throwSystemError("simulated device: duplicating a device allocation's descriptor for export", errno);
    *where = IpcHandle{};
    where->size = it->second.mapped;
    where->offset = addr - it->first;
    return fd;
  }
  void* importFd(int fd, size_t size, size_t offset) override {
    struct stat st {};
    if (fstat(fd, &st) != 0)
      throwSystemError("simulated device: fstat of a peer's device allocation descriptor", errno);
    // A mapping past the end of the file would fault on first touch: refuse it before mapping anything.
    if (size == 0 || offset >= size || static_cast<uint64_t>(st.st_size) < size)
      throwInvalidArgument(
          fmt::format("simulated device: a peer's device allocation descriptor holds {} bytes, but {} bytes (offset "
                      "{}) were to be mapped from it",
                      static_cast<long long>(st.st_size), size, offset));
    char* rw = nullptr;
    void* p = mapViews(fd, size, strict_, &rw);
    if (p == MAP_FAILED) throwSystemError("simulated device: cannot map a peer's device allocation descriptor", errno);
    std::lock_guard<std::mutex> l(mu_);
    allocs_[reinterpret_cast<uintptr_t>(p)] = Allocation{size, size, -1, true, false, rw};
    return static_cast<char*>(p) + offset;
  }

  std::string peerKey() const override { return "sim"; }
  // Mappings of /proc/<pid>/fd work between any processes of one machine (and user).
  bool canAccessPeer(const std::string& key) override { return key == "sim"; }

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
  enum class Access { Copy, Kernel };
  enum class Kernel { Reduce, Scale, Divide };
  static constexpr kernels::BinOp kAllOps[] = {kernels::BinOp::Sum, kernels::BinOp::Prod, kernels::BinOp::Max,
                                               kernels::BinOp::Min};

  static int kernelKey(Kernel k, hocclDataType_t dt, kernels::BinOp op = kernels::BinOp::Sum) {
    return (static_cast<int>(k) << 16) | (static_cast<int>(dt) << 8) | static_cast<int>(op);
  }

  // A stream of this device with a queued flag wait that is not met (see the file comment), if any.
  struct Blocked {
    Stream stream;  // null: the default stream
    SimStream::UnmetWait wait;
  };
  std::optional<Blocked> blockedOnFlagLocked() const {  // mu_ held
    for (const auto& [handle, s] : streams_)
      if (auto w = s->unmetWait()) return Blocked{handle, *w};
    if (defaultStream_)
      if (auto w = defaultStream_->unmetWait()) return Blocked{nullptr, *w};
    return std::nullopt;
  }

  static std::string describe(const Blocked& b) {
    return fmt::format("stream {} waits for a host flag (value {}, the flag at {} holds {})",
                       b.stream ? fmt::format("{}", b.stream) : std::string("0x0 (the default stream)"), b.wait.value,
                       static_cast<const void*>(b.wait.flag), b.wait.held);
  }

  // cuMemFree and cuMemFreeHost may wait for the whole device: throws, before anything is freed, when a stream waits
  // for a flag the host has not set yet. `what`: the call and its pointer. mu_ held. Both refusals here are
  // hocclInternalError: met on the proxy (hoccl's own code), a GPU would hang there mid-collective, so the communicator
  // is broken and the failure is shared with every rank (instead of the peers waiting for this one until the timeout).
  void refuseWhileFlagWait(const std::string& what) const {
    const std::optional<Blocked> b = blockedOnFlagLocked();
    if (!b) return;
    throw Error(hocclInternalError,
                fmt::format("simulated device: {} while {}: on a GPU this waits for the whole device to go idle, so "
                            "it deadlocks when the flag is set by the host after this call (hoccl's proxy sets it "
                            "once it has run the stream's collective); free after the stream has run past the wait "
                            "(keep the memory until then)",
                            what, describe(*b)));
  }

  // The launch of a kernel: under HOCCL_SIM_LAZY_LOADING=1, its first launch loads it, which on a GPU waits for the
  // whole device; throws (nothing launched, the kernel still not loaded) when a stream waits for an unset flag.
  void load(Kernel k, hocclDataType_t dt, kernels::BinOp op = kernels::BinOp::Sum) {
    if (kernels::typeSize(dt) == 0) return;  // an invalid type: the kernel itself reports it
    const int key = kernelKey(k, dt, op);
    std::lock_guard<std::mutex> l(mu_);
    if (loaded_.count(key)) return;
    if (const std::optional<Blocked> b = blockedOnFlagLocked()) {
      const std::string kernel = k == Kernel::Reduce
                                     ? fmt::format("reduce kernel ({}, {})", kernels::typeName(dt), kernels::opName(op))
                                     : fmt::format("{} kernel ({})", k == Kernel::Scale ? "scale" : "divide",
                                                   kernels::typeName(dt));
      throw Error(hocclInternalError,
                  fmt::format("simulated device: the first launch of the {} loads it (CUDA lazy loading, "
                              "HOCCL_SIM_LAZY_LOADING=1) while {}: on a GPU loading waits for the whole device to go "
                              "idle, so it deadlocks when the flag is set by the host after this call (hoccl's proxy "
                              "sets it once it has run the stream's collective); load every kernel before any stream "
                              "waits for the host, as the CUDA device does when it is created (hocclCudaPreload)",
                              kernel, describe(*b)));
    }
    loaded_.insert(key);
  }

  // Where the device's copies and kernels reach [p, p + bytes): the device view of a device allocation (the range must
  // lie inside it), memory of mallocHost as is, and ordinary host memory as is for a copy (cuMemcpyAsync takes it)
  // but, in strict mode, not for a kernel (a GPU kernel cannot read pageable host memory). Throws naming the pointer.
  template <class T>
  T* view(T* p, size_t bytes, Access access) const {
    const auto addr = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> l(mu_);
    auto it = allocs_.upper_bound(addr);
    if (it != allocs_.begin()) {
      --it;
      const Allocation& a = it->second;
      const size_t limit = a.imported ? a.mapped : std::max<size_t>(a.size, 1);
      if (addr < it->first + limit) {
        if (addr + bytes > it->first + limit)
          throwInvalidArgument(
              fmt::format("simulated device: {} bytes at {} run past the end of the device allocation "
                          "at {:#x} ({} bytes)",
                          bytes, static_cast<const void*>(p), it->first, limit));
        return reinterpret_cast<T*>(a.rw + (addr - it->first));
      }
    }
    if (access == Access::Copy || !strict_) return p;
    auto pin = pinned_.upper_bound(addr);
    if (pin != pinned_.begin() && addr + bytes <= (--pin)->first + pin->second) return p;
    throwInvalidArgument(
        fmt::format("simulated device: a kernel was given {} ({} bytes), which is neither device "
                    "memory nor pinned host memory (mallocHost); a GPU kernel cannot reach it",
                    static_cast<const void*>(p), bytes));
  }

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

  const bool strict_ = params::SIM_HOST_ACCESS.get() == 0;
  const bool lazyLoading_ = params::SIM_LAZY_LOADING.get() == 1;
  mutable std::mutex mu_;
  std::set<int> loaded_;  // kernelKey of every loaded kernel
  std::map<uintptr_t, Allocation> allocs_;
  std::map<uintptr_t, size_t> pinned_;  // mallocHost: address -> bytes
  std::map<Stream, std::unique_ptr<SimStream>> streams_;
  std::unique_ptr<SimStream> defaultStream_;
};

}  // namespace

std::unique_ptr<Device> makeSimDevice() { return std::make_unique<SimDevice>(); }

}  // namespace hoccl::device
