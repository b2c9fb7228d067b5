// The direct device path's channel (transports/cuda_ipc/cuda_ipc_channel.h) between two "ranks" of this process on the
// simulated device, over an in-memory wire: data and reductions through the peer's slots with the credits cycling,
// a receive posted only after the peer's Readys arrived (the schedules' steps need not line up), a size mismatch
// refused naming both ranks, a piece tagged for another call refused, and the fallback when one side does not take
// part.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "base/error.h"
#include "kernels/device/sim_device.h"
#include "transports/cuda_ipc/cuda_ipc_channel.h"

using namespace hoccl;
using transport::Channel;
using transport::DeviceChannel;
using transport::RecvTarget;
using transport::cuda_ipc::HandleMode;
using transport::cuda_ipc::IpcChannel;

namespace {

/// Messages in one direction, in order.
struct Pipe {
  std::deque<std::vector<char>> msgs;
};

/// An ordered in-memory channel: a send is queued whole at once, a receive takes the next message, which must have
/// its size.
class FakeWire final : public Channel {
 public:
  FakeWire(int peer, Pipe& in, Pipe& out) : peer_(peer), in_(in), out_(out) {}
  int peer() const override { return peer_; }
  void postSend(const void* data, size_t bytes) override {
    const char* p = static_cast<const char*>(data);
    out_.msgs.emplace_back(p, p + bytes);
  }
  void postRecv(size_t bytes, RecvTarget target) override { recvs_.push_back({bytes, std::move(target)}); }
  bool progress() override {
    bool moved = false;
    while (!recvs_.empty() && !in_.msgs.empty()) {
      std::vector<char> m = std::move(in_.msgs.front());
      in_.msgs.pop_front();
      Posted r = std::move(recvs_.front());
      recvs_.pop_front();
      REQUIRE(m.size() == r.bytes);
      if (r.target.direct) std::memcpy(r.target.direct, m.data(), m.size());
      else r.target.sink(m.data(), 0, m.size());
      moved = true;
    }
    return moved;
  }
  size_t pending() const override { return recvs_.size(); }

 private:
  struct Posted {
    size_t bytes;
    RecvTarget target;
  };
  int peer_;
  Pipe& in_;
  Pipe& out_;
  std::deque<Posted> recvs_;
};

/// A fallback that only counts what it is given.
class Recorder final : public DeviceChannel {
 public:
  explicit Recorder(Channel& wire) : wire_(wire) {}
  int peer() const override { return wire_.peer(); }
  void postSend(const void*, size_t) override { ++sends; }
  void postRecv(size_t, RecvTarget) override { ++recvs; }
  void postRecvReduce(void*, const void*, size_t, hocclDataType_t, kernels::BinOp, transport::CallTag) override {
    ++recvs;
  }
  bool progress() override { return false; }
  size_t pending() const override { return 0; }
  const Channel& wire() const override { return wire_; }
  const char* path() const override { return "staged"; }
  int sends = 0, recvs = 0;

 private:
  Channel& wire_;
};

transport::DeviceFallback noFallback() {
  return []() -> std::unique_ptr<DeviceChannel> {
    FAIL("the direct path fell back");
    return nullptr;
  };
}

// Drives both channels until done() or 20 s.
template <class Done>
void drive(IpcChannel& a, IpcChannel& b, Done&& done) {
  const auto start = std::chrono::steady_clock::now();
  while (!done()) {
    a.progress();
    b.progress();
    REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  }
}

std::vector<float> iota(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 1000) * 0.5f;
  return v;
}

}  // namespace

TEST_CASE("direct device channel: pieces through the peer's slots, a receive posted after its data", "[cuda_ipc]") {
  // Both ways of sharing the slot areas: a legacy handle, and a cuMem descriptor passed over a Unix socket.
  const HandleMode handles = GENERATE(HandleMode::Legacy, HandleMode::Fd, HandleMode::Auto);
  auto& stats = transport::deviceChannelStats();
  const uint64_t fdBefore = stats.fdMappedChannels, legacyBefore = stats.legacyMappedChannels;
  auto dev = device::makeSimDevice();
  Pipe p01, p10;
  FakeWire w0(1, p10, p01), w1(0, p01, p10);
  IpcChannel c0(w0, *dev, 0, 1, true, 4096, 2, noFallback(), handles);
  IpcChannel c1(w1, *dev, 1, 0, true, 4096, 2, noFallback(), handles);
  CHECK(std::string(c0.path()) == "negotiating");

  const size_t nA = 3 * 1024 + 25, nB = 2 * 1024 + 2;  // floats: 4 and 3 pieces of 4096 bytes, odd tails
  const std::vector<float> a = iota(nA, 1.0f), b = iota(nB, 100.0f), local = iota(nB, -7.0f);
  auto upload = [&](const std::vector<float>& v) {
    void* p = dev->malloc(v.size() * sizeof(float));
    dev->memcpy(p, v.data(), v.size() * sizeof(float));
    return p;
  };
  void* a0 = upload(a);
  void* b1 = upload(b);
  void* local0 = upload(local);
  void* r1 = dev->malloc(nA * sizeof(float));
  void* r0 = dev->malloc(nB * sizeof(float));

  // Rank 0, step 1: send A. Rank 1, step 1: send B and receive A. Rank 0, step 2: receive-reduce B. Rank 1's Readys
  // for B reach rank 0 while its only posted operation is the send: they wait for the receive.
  c0.postSend(a0, nA * sizeof(float));
  c1.postSend(b1, nB * sizeof(float));
  RecvTarget t;
  t.direct = r1;
  t.granule = 4;
  c1.postRecv(nA * sizeof(float), t);
  drive(c0, c1, [&] { return c0.pending() == 0; });
  CHECK(std::string(c0.path()) == "p2p");
  CHECK(std::string(c1.path()) == "p2p");
  // Auto takes descriptors on the simulated device (its memory is always cuMem-like, as on a GPU with cuMem).
  const bool fd = handles != HandleMode::Legacy;
  CHECK(stats.fdMappedChannels - fdBefore == (fd ? 2u : 0u));
  CHECK(stats.legacyMappedChannels - legacyBefore == (fd ? 0u : 2u));
  CHECK(c1.pending() > 0);  // its send waits for rank 0's receive
  c0.postRecvReduce(r0, local0, nB, hocclFloat, kernels::BinOp::Sum, 0);
  drive(c0, c1, [&] { return c0.pending() == 0 && c1.pending() == 0; });

  std::vector<float> gotA(nA), gotB(nB);
  dev->memcpy(gotA.data(), r1, nA * sizeof(float));
  dev->memcpy(gotB.data(), r0, nB * sizeof(float));
  CHECK(gotA == a);
  for (size_t i = 0; i < nB; ++i) REQUIRE(gotB[i] == local[i] + b[i]);
  CHECK(p01.msgs.empty());  // every frame was taken, none is left for a later call
  CHECK(p10.msgs.empty());
  for (void* p : {a0, b1, local0, r1, r0}) dev->free(p);
}

TEST_CASE("direct device channel: a send and a receive of different sizes fail naming both", "[cuda_ipc]") {
  auto dev = device::makeSimDevice();
  Pipe p01, p10;
  FakeWire w0(1, p10, p01), w1(0, p01, p10);
  IpcChannel c0(w0, *dev, 0, 1, true, 4096, 2, noFallback());
  IpcChannel c1(w1, *dev, 1, 0, true, 4096, 2, noFallback());
  void* src = dev->malloc(1000);
  void* dst = dev->malloc(1000);
  std::vector<char> pattern(1000, 'x');
  dev->memcpy(dst, pattern.data(), 1000);
  c0.postSend(src, 1000);
  RecvTarget t;
  t.direct = dst;
  c1.postRecv(500, t);
  try {
    drive(c0, c1, [] { return false; });
    FAIL("the mismatch was not noticed");
  } catch (const Error& e) {
    CHECK(e.code() == hocclInvalidUsage);
    CHECK_THAT(e.what(), Catch::Contains("rank 0 sends 1000 bytes where rank 1 receives 500 bytes"));
  }
  std::vector<char> after(1000);
  dev->memcpy(after.data(), dst, 1000);
  CHECK(after == pattern);  // nothing landed
  dev->free(src);
  dev->free(dst);
}

TEST_CASE("direct device channel: a piece of the right size tagged for another call fails naming both",
          "[cuda_ipc][tag]") {
  // Equal tags, or 0 on either side, deliver (a copy, and a reduction); different tags fail the receiver with
  // hocclInvalidUsage naming both ranks and both calls, before a byte lands.
  struct Tags {
    transport::CallTag send, recv;
    bool mismatch;
  };
  const Tags t = GENERATE(Tags{0xabc, 0xabc, false}, Tags{0xabc, 0, false}, Tags{0, 0xabc, false},
                          Tags{0xabc, 0xabd, true});
  const bool reduce = GENERATE(false, true);
  auto dev = device::makeSimDevice();
  Pipe p01, p10;
  FakeWire w0(1, p10, p01), w1(0, p01, p10);
  IpcChannel c0(w0, *dev, 0, 1, true, 4096, 2, noFallback());
  IpcChannel c1(w1, *dev, 1, 0, true, 4096, 2, noFallback());
  const size_t n = 2500;  // floats: 3 pieces of 4096 bytes
  const std::vector<float> sent = iota(n, 3.0f), pattern = iota(n, -1.0f);
  void* src = dev->malloc(n * sizeof(float));
  void* dst = dev->malloc(n * sizeof(float));
  dev->memcpy(src, sent.data(), n * sizeof(float));
  dev->memcpy(dst, pattern.data(), n * sizeof(float));
  c0.postTaggedSend(src, n * sizeof(float), t.send);
  if (reduce) {
    c1.postRecvReduce(dst, dst, n, hocclFloat, kernels::BinOp::Sum, t.recv);
  } else {
    RecvTarget target;
    target.direct = dst;
    target.granule = 4;
    target.tag = t.recv;
    c1.postRecv(n * sizeof(float), target);
  }
  std::string error;
  try {
    drive(c0, c1, [&] { return c0.pending() == 0 && c1.pending() == 0; });
  } catch (const Error& e) {
    CHECK(e.code() == hocclInvalidUsage);
    error = e.what();
  }
  std::vector<float> got(n);
  dev->memcpy(got.data(), dst, n * sizeof(float));
  if (t.mismatch) {
    CHECK_THAT(error, Catch::Contains("rank 0 sent a piece of the right size for call 0x00000abc where rank 1 is in "
                                      "call 0x00000abd"));
    CHECK(got == pattern);  // nothing landed
  } else {
    CHECK(error.empty());
    for (size_t i = 0; i < n; ++i) REQUIRE(got[i] == (reduce ? pattern[i] + sent[i] : sent[i]));
  }
  dev->free(src);
  dev->free(dst);
}

TEST_CASE("direct device channel: both fall back when one rank does not take part", "[cuda_ipc]") {
  auto dev = device::makeSimDevice();
  Pipe p01, p10;
  FakeWire w0(1, p10, p01), w1(0, p01, p10);
  Recorder* f0 = nullptr;
  Recorder* f1 = nullptr;
  IpcChannel c0(w0, *dev, 0, 1, false, 4096, 2, [&]() -> std::unique_ptr<DeviceChannel> {
    auto r = std::make_unique<Recorder>(w0);
    f0 = r.get();
    return r;
  });
  IpcChannel c1(w1, *dev, 1, 0, true, 4096, 2, [&]() -> std::unique_ptr<DeviceChannel> {
    auto r = std::make_unique<Recorder>(w1);
    f1 = r.get();
    return r;
  });
  void* buf = dev->malloc(64);
  c0.postSend(buf, 64);  // before the agreement: replayed on the fallback
  RecvTarget t;
  t.direct = buf;
  c1.postRecv(64, t);
  drive(c0, c1, [&] { return f0 && f1; });
  CHECK(std::string(c0.path()) == "staged");
  CHECK(std::string(c1.path()) == "staged");
  CHECK(f0->sends == 1);
  CHECK(f1->recvs == 1);
  CHECK(p01.msgs.empty());
  CHECK(p10.msgs.empty());
  dev->free(buf);
}
