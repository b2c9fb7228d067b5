// The shared-memory channel: segment mapping, the slot ring protocol and futex sleeping (see shm_channel.h).
#include "transports/shm/shm_channel.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <new>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "kernels/cpu/copy.h"
#include "transports/shm/shm_file.h"
#include "transports/transport_util.h"

namespace hoccl::transport::shm {
namespace {

constexpr uint64_t kSegmentMagic = 0x6d68736c63636f68ULL;  // "hocclshm" in little-endian bytes
constexpr auto kPeerCheckInterval = std::chrono::milliseconds(100);

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word must be a plain 32-bit word");
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

size_t segmentBytes(uint32_t slotBytes, uint32_t slots) {
  return kHeaderRegion + static_cast<size_t>(slotBytes) * slots;
}

void* mapFd(int fd, size_t bytes, const std::string& name) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    throwSystemError(
        fmt::format("shm: cannot map segment {} ({} bytes); check free memory (free -h, the cgroup's memory limit), "
                    "or lower HOCCL_SHM_SLOTS / HOCCL_SHM_SLOT_SIZE, or set HOCCL_SHM_DISABLE=1",
                    name, bytes),
        err);
  }
  return base;
}

}  // namespace

// ---- Segment ----

Segment::Segment(std::string name, void* base, size_t bytes, int file)
    : name_(std::move(name)), base_(base), bytes_(bytes), file_(file) {
  header_ = static_cast<SegmentHeader*>(base_);
  data_ = static_cast<char*>(base_) + kHeaderRegion;
}

Segment::~Segment() {
  unlink();
  if (base_) munmap(base_, bytes_);
}

void Segment::unlink() {
  if (file_ >= 0) {
    closeSharedFile(name_, file_);
    file_ = -1;
  }
}

std::unique_ptr<Segment> Segment::create(const std::string& name, uint32_t slotBytes, uint32_t slots, int sender,
                                         int receiver) {
  size_t bytes = segmentBytes(slotBytes, slots);
  int fd = createSharedFile(name, bytes,
                            fmt::format("rank {} -> rank {}: check free memory (free -h, the cgroup's memory "
                                        "limit), or lower HOCCL_SHM_SLOTS / "
                                        "HOCCL_SHM_SLOT_SIZE, or set HOCCL_SHM_DISABLE=1 to use tcp instead",
                                        sender, receiver));
  void* base = nullptr;
  try {
    base = mapFd(fd, bytes, name);
  } catch (...) {
    close(fd);
    throw;
  }
  std::unique_ptr<Segment> seg(new Segment(name, base, bytes, fd));
  SegmentHeader* h = new (base) SegmentHeader();
  h->slotBytes = slotBytes;
  h->slots = slots;
  h->sender = sender;
  h->receiver = receiver;
  h->senderPid = getpid();
  h->head.store(0, std::memory_order_relaxed);
  for (auto& info : h->info) info.seq.store(0, std::memory_order_relaxed);
  h->tail.store(0, std::memory_order_relaxed);
  h->bell.store(0, std::memory_order_relaxed);
  h->sleeping.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegmentMagic;
  return seg;
}

std::unique_ptr<Segment> Segment::open(const std::string& name, int creatorPid, int sender, int receiver) {
  int fd = openSharedFile(creatorPid, name, fmt::format("rank {} opening the segment of rank {}", receiver, sender));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < kHeaderRegion) {
    close(fd);
    throwInternalError(fmt::format("shm: segment {} from rank {} is truncated", name, sender));
  }
  void* base = nullptr;
  try {
    base = mapFd(fd, static_cast<size_t>(st.st_size), name);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  std::unique_ptr<Segment> seg(new Segment(name, base, static_cast<size_t>(st.st_size), -1));
  const SegmentHeader* h = seg->header();
  if (h->magic != kSegmentMagic || h->sender != sender || h->receiver != receiver || h->slots == 0 ||
      h->slots > kMaxSlots || h->slotBytes == 0 || segmentBytes(h->slotBytes, h->slots) > seg->bytes_)
    throwInternalError(
        fmt::format("shm: segment {} has a bad header (magic {:#x}, ranks {}->{}, {} slots of {} bytes); "
                    "is another job using the same name?",
                    name, h->magic, h->sender, h->receiver, h->slots, h->slotBytes));
  return seg;
}

// ---- ShmChannel ----

ShmChannel::ShmChannel(const boot::RankInfo& self, const boot::RankInfo& peerInfo, bool checkPid,
                       std::unique_ptr<Segment> out, std::unique_ptr<Segment> in)
    : self_(self), peer_(peerInfo), checkPid_(checkPid), out_(std::move(out)), in_(std::move(in)) {
  outHdr_ = out_->header();
  inHdr_ = in_->header();
  outHead_ = outHdr_->head.load(std::memory_order_relaxed);
  inTail_ = inHdr_->tail.load(std::memory_order_relaxed);
  nextCheck_ = std::chrono::steady_clock::now() + kPeerCheckInterval;
}

ShmChannel::~ShmChannel() = default;

void ShmChannel::postTaggedSend(const void* data, size_t bytes, CallTag tag) {
  if (bytes == 0) return;  // both sides skip empty messages: nothing to match
  if (!data)
    throwInvalidArgument(fmt::format("shm: send of {} bytes to rank {} from a null buffer", bytes, peer_.rank));
  sends_.push_back({static_cast<const char*>(data), bytes, 0, tag});
  ++sendPosted_;
}

void ShmChannel::postRecv(size_t bytes, RecvTarget target) {
  if (bytes == 0) return;
  if (!target.direct && !target.sink)
    throwInvalidArgument(
        fmt::format("shm: receive of {} bytes from rank {} has neither a buffer nor a sink", bytes, peer_.rank));
  recvs_.push_back({bytes, 0, std::move(target)});
}

bool ShmChannel::progressSends() {
  bool moved = false;
  const uint32_t slotBytes = outHdr_->slotBytes;
  const uint32_t slots = outHdr_->slots;
  while (!sends_.empty()) {
    PendingSend& s = sends_.front();
    uint64_t tail = outHdr_->tail.load(std::memory_order_acquire);
    if (outHead_ - tail >= slots) break;  // ring full
    if (s.control) {                      // a handshake word, between two messages
      publishControl(s, outHdr_->info[outHead_ % slots]);
      --ctrlQueued_;
      sends_.pop_front();
      moved = true;
      continue;
    }
    size_t n = std::min<size_t>(slotBytes, s.bytes - s.done);
    SlotInfo& info = outHdr_->info[outHead_ % slots];
    const bool inlined = s.done == 0 && n <= kInlineBytes;
    if (inlined) std::memcpy(info.inlineData, s.data, n);
    else kernels::copy(out_->slot(outHead_), s.data + s.done, n);  // whatever the buffer's offset in its line
    s.done += n;
    info.bytes = static_cast<uint32_t>(n);
    info.last = s.done == s.bytes ? 1 : 0;
    info.kind = inlined ? kSlotInline : kSlotData;
    info.tag = s.tag;
    info.messageBytes = static_cast<uint32_t>(std::min<size_t>(s.bytes, UINT32_MAX));
    publish(info);
    moved = true;
    if (s.done == s.bytes) sends_.pop_front();
  }
  return moved;
}

bool ShmChannel::progressRecvs() {
  bool moved = false;
  const uint32_t slots = inHdr_->slots;
  while (!recvs_.empty()) {
    const SlotInfo& info = inHdr_->info[inTail_ % slots];
    if (info.seq.load(std::memory_order_acquire) != inTail_ + 1) break;  // nothing published
    PendingRecv& r = recvs_.front();
    if (info.kind == kSlotControl && r.done == 0) {  // a receive is posted: the channel is busy (shm_close.cc)
      moved |= takeControl(false, true);
      continue;
    }
    bool endsHere = r.done + info.bytes == r.bytes;
    if (info.bytes == 0 || r.done + info.bytes > r.bytes || endsHere != (info.last != 0)) {
      const std::string sent = info.messageBytes == UINT32_MAX ? std::string("4 GiB or more")
                                                               : std::to_string(info.messageBytes);
      throwMismatch(
          fmt::format("shm: message size mismatch with {}: this rank posted a receive of {} bytes, the peer sent "
                      "a message of {} bytes (got {} bytes of it so far; nothing more was read). The two ranks posted "
                      "different sizes: their calls differ (count, type, collective or order)",
                      describePeer(peer_), r.bytes, sent, r.done));
    }
    if (r.target.tag && info.tag && info.tag != r.target.tag)
      throwMismatch(fmt::format(
          "shm: the message from {} belongs to another call: its size ({} bytes) matches this rank's receive, but it "
          "is tagged for call {:#010x} where this rank receives for call {:#010x} (got {} bytes of it so far; nothing "
          "more was read). The two ranks' calls differ (type, op, count, collective or order) in a way their "
          "message sizes do not show; HOCCL_CHECK_MISMATCH=2 names both calls",
          describePeer(peer_), info.messageBytes, info.tag, r.target.tag, r.done));
    const char* src = info.kind == kSlotInline ? info.inlineData : in_->slot(inTail_);
    if (r.target.direct) kernels::copy(static_cast<char*>(r.target.direct) + r.done, src, info.bytes);
    else r.target.sink(src, r.done, info.bytes);
    r.done += info.bytes;
    inHdr_->tail.store(++inTail_, std::memory_order_release);
    moved = true;
    if (r.done == r.bytes) {
      recvs_.pop_front();
      ++recvDone_;
    }
  }
  return moved;
}

void ShmChannel::publish(SlotInfo& info) {
  info.seq.store(outHead_ + 1, std::memory_order_release);
  outHdr_->head.store(++outHead_, std::memory_order_release);
}

void ShmChannel::ringPeer() {
  // Pairs with the fence in waitForActivity(): either the peer sees our counter, or we see its flag.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (outHdr_->sleeping.load(std::memory_order_relaxed)) {
    outHdr_->bell.fetch_add(1, std::memory_order_seq_cst);
    futex(&outHdr_->bell, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

bool ShmChannel::progress() {
  if (sends_.empty() && recvs_.empty()) return false;
  bool moved = progressRecvs();
  moved = progressSends() || moved;
  if (moved) {
    ringPeer();
  } else {
    checkPeerWhilePolling();
  }
  return moved;
}

bool ShmChannel::ready() const {
  if (!recvs_.empty() && inHdr_->info[inTail_ % inHdr_->slots].seq.load(std::memory_order_acquire) == inTail_ + 1)
    return true;
  if (!sends_.empty()) {
    uint64_t tail = outHdr_->tail.load(std::memory_order_acquire);
    if (outHead_ - tail < outHdr_->slots) return true;
  }
  return false;
}

void ShmChannel::waitForActivity(int timeoutMicros) {
  if (timeoutMicros <= 0) return;
  if (sends_.empty() && recvs_.empty()) {
    Channel::waitForActivity(timeoutMicros);
    return;
  }
  checkPeer(false);
  uint32_t seen = inHdr_->bell.load(std::memory_order_acquire);
  inHdr_->sleeping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!ready()) {
    timespec ts{timeoutMicros / 1000000, static_cast<long>(timeoutMicros % 1000000) * 1000};
    futex(&inHdr_->bell, FUTEX_WAIT, seen, &ts);  // EAGAIN (bell moved), ETIMEDOUT, EINTR: all mean "look again"
  }
  inHdr_->sleeping.store(0, std::memory_order_relaxed);
}

void ShmChannel::checkPeerWhilePolling() {
  if ((++idlePolls_ & 255) == 0) checkPeer(false);  // reading the clock on every idle poll costs more than the poll
}

void ShmChannel::checkPeer(bool force) {
  if (!checkPid_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now < nextCheck_) return;
  nextCheck_ = now + kPeerCheckInterval;
  if (!processAlive(peer_.pid)) peerGone("its process has exited or was killed");
}

void ShmChannel::peerGone(const std::string& why) const {
  throwRemoteError(
      fmt::format("shm: rank {} lost its peer {}: {} while {} send(s) and {} receive(s) were pending. "
                  "Look at the peer's output for the cause (crash, OOM kill, abort, or a different "
                  "sequence of collective calls on that rank)",
                  self_.rank, describePeer(peer_), why, sends_.size(), recvs_.size()));
}

}  // namespace hoccl::transport::shm
