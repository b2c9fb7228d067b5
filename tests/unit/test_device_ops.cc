// The kernels and stream machinery of the process's device (device::current()): on a GPU machine the CUDA device
// (kernels of the libhoccl-cuda plugin, cuStreamWaitValue32 flags, pinned host memory), in CI the simulated device
// (HOCCL_DEVICE=sim). The same checks either way, only through the Device interface: device memory is written and
// read with the device's copies, never touched by the host.
//
// - reduce (sum, prod, max, min), scale (PreMulSum) and divide (Avg) for all 12 types against a double-precision
//   reference on values every type holds exactly, with operands equally and differently misaligned (the packed
//   16-byte and the all-scalar splits), guard bytes on both sides, in place and out of place, counts from 0 to past
//   a million (more blocks than the grid: the grid-stride loop);
// - random data of every type (fp8 and fp16 saturating, integers wrapping) bit for bit against the CPU kernels;
// - a flag wait holds later work until the host sets the flag; events and host functions keep stream order;
//   pinned host memory is read by the kernels;
// - the one-kernel all-reduce (kernels/device/one_shot_phases.h) with its ranks as streams of this device: every type and op
//   bit for bit against the CPU kernels folded in rank order, calls in a row, in place, and each way a launch ends
//   early (a mismatch, its timeout, a failed peer, its abort word).
//
// No device (HOCCL_DEVICE unset on a machine without a GPU): every case fails saying so, never passes silently.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "kernels/device/device.h"
#include "kernels/device/one_shot_phases.h"
#include "device_reference.h"

using namespace hoccl;
using namespace hoccl::kernels;
using hoccl::testref::refOp;
using hoccl::testref::valueAt;

namespace {

device::Device& dev() {
  device::Device* d = device::current();
  if (!d) FAIL("no device: run on a machine with an NVIDIA GPU, or set HOCCL_DEVICE=sim");
  return *d;
}

// Device memory of `bytes` plus 16 guard bytes on each side, all 0x5a; at(off) is the address off bytes into the
// usable part.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : size(bytes + 32), base(static_cast<char*>(dev().malloc(size))) {
    std::vector<char> fill(size, 0x5a);
    dev().memcpy(base, fill.data(), size);
  }
  ~DeviceBuffer() { dev().free(base); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* at(size_t off) const { return base + 16 + off; }
  std::vector<char> read() const {
    std::vector<char> h(size);
    dev().memcpy(h.data(), base, size);
    return h;
  }
  size_t size;
  char* base;
};

// The elements of a device buffer as the host sees them after the stream has run (h from DeviceBuffer::read).
const char* elems(const std::vector<char>& h, size_t off) { return h.data() + 16 + off; }

// memcmp(a, b, bytes) == 0, where either may be the null data() of an empty vector when bytes is 0.
bool sameBytes(const void* a, const void* b, size_t bytes) { return bytes == 0 || std::memcmp(a, b, bytes) == 0; }

}  // namespace

TEST_CASE("device reduce, scale and divide match a double reference with unaligned heads and tails") {
  device::Device& d = dev();
  INFO("device: " << d.name());
  device::Stream s = d.createStream();
  for (int t = 0; t < hocclNumTypes; ++t) {
    const auto dt = static_cast<hocclDataType_t>(t);
    const size_t e = typeSize(dt);
    for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(17), size_t(1029), size_t(70001), size_t(1 << 20) + 5})
      for (size_t offA : {0, 1, 3})
        for (size_t offB : {0, 1}) {
          if (n > 70001 && (offA != 1 || offB != 0)) continue;  // the large count once, differently misaligned
          const size_t bytes = (n + 4) * e;
          DeviceBuffer A(bytes), B(bytes), D(bytes);
          std::vector<char> ha(n * e), hb(n * e);
          for (size_t i = 0; i < n; ++i) {
            fromDouble(valueAt(i, 1, dt), ha.data() + i * e, dt);
            fromDouble(valueAt(i, 2, dt), hb.data() + i * e, dt);
          }
          char* a = A.at(offA * e);
          char* b = B.at(offB * e);
          char* dst = D.at(offA * e);
          d.memcpy(a, ha.data(), n * e);
          d.memcpy(b, hb.data(), n * e);
          for (BinOp op : {BinOp::Sum, BinOp::Prod, BinOp::Max, BinOp::Min}) {
            d.launchReduce(s, dst, a, b, n, dt, op);
            d.synchronize(s);
            const std::vector<char> got = D.read();
            size_t wrong = 0;
            std::vector<char> w(e);
            for (size_t i = 0; i < n; ++i) {
              fromDouble(refOp(valueAt(i, 1, dt), valueAt(i, 2, dt), op), w.data(), dt);
              if (std::memcmp(elems(got, offA * e) + i * e, w.data(), e) != 0 && wrong++ == 0) {
                INFO("type " << typeName(dt) << " op " << int(op) << " n " << n << " offsets " << offA << "," << offB
                             << " element " << i);
                CHECK(toDouble(elems(got, offA * e) + i * e, dt) == toDouble(w.data(), dt));
              }
            }
            CHECK(wrong == 0);
            for (size_t g = 0; g < 16 + offA * e; ++g) CHECK(static_cast<unsigned char>(got[g]) == 0x5a);
            for (size_t g = 16 + offA * e + n * e; g < got.size(); ++g)
              CHECK(static_cast<unsigned char>(got[g]) == 0x5a);
          }
          // In place (dst == a): a += b, then scale b by 2 into dst (PreMulSum), then a /= 3 (Avg).
          d.launchReduce(s, a, a, b, n, dt, BinOp::Sum);
          std::vector<char> two(e);
          fromDouble(2.0, two.data(), dt);
          d.launchScale(s, dst, b, n, dt, two.data());
          d.synchronize(s);
          std::vector<char> sum(ha);
          kernels::reduce(sum.data(), sum.data(), hb.data(), n, dt, BinOp::Sum);
          const std::vector<char> gotA = A.read(), gotD = D.read();
          CHECK(sameBytes(elems(gotA, offA * e), sum.data(), n * e));
          size_t wrong = 0;
          std::vector<char> w(e);
          for (size_t i = 0; i < n; ++i) {
            fromDouble(valueAt(i, 2, dt) * 2.0, w.data(), dt);
            wrong += std::memcmp(elems(gotD, offA * e) + i * e, w.data(), e) != 0;
          }
          INFO("scale: type " << typeName(dt) << " n " << n);
          CHECK(wrong == 0);
          d.launchDivide(s, a, n, dt, 3);
          d.synchronize(s);
          kernels::divide(sum.data(), n, dt, 3);
          const std::vector<char> divided = A.read();
          INFO("divide: type " << typeName(dt) << " n " << n);
          CHECK(sameBytes(elems(divided, offA * e), sum.data(), n * e));
          // A device-to-device copy with the same misalignments.
          d.launchCopy(s, dst, b, n * e);
          d.synchronize(s);
          const std::vector<char> copied = D.read();
          CHECK(sameBytes(elems(copied, offA * e), hb.data(), n * e));
        }
  }
  d.destroyStream(s);
}

TEST_CASE("device kernels on random data of every type equal the CPU kernels bit for bit") {
  device::Device& d = dev();
  INFO("device: " << d.name());
  device::Stream s = d.createStream();
  std::mt19937_64 rng(17);
  const size_t n = 100003;
  for (int t = 0; t < hocclNumTypes; ++t) {
    const auto dt = static_cast<hocclDataType_t>(t);
    const size_t e = typeSize(dt);
    const bool isFloat = dt == hocclFloat16 || dt == hocclFloat32 || dt == hocclFloat64 || dt == hocclBfloat16 ||
                         dt == hocclFloat8e4m3 || dt == hocclFloat8e5m2;
    std::vector<char> ha(n * e), hb(n * e);
    std::uniform_real_distribution<double> wide(-70000.0, 70000.0);  // past fp16's and e4m3's range: saturation
    for (size_t i = 0; i < n; ++i) {
      if (isFloat) {
        fromDouble(wide(rng) / double(1 << (rng() % 20)), ha.data() + i * e, dt);
        fromDouble(wide(rng) / double(1 << (rng() % 20)), hb.data() + i * e, dt);
      } else {  // any bits: integers wrap
        const uint64_t x = rng(), y = rng();
        std::memcpy(ha.data() + i * e, &x, e);
        std::memcpy(hb.data() + i * e, &y, e);
      }
    }
    DeviceBuffer A(n * e), B(n * e), D(n * e);
    d.memcpy(A.at(e), ha.data(), (n - 1) * e);  // misaligned by one element, n - 1 elements
    d.memcpy(B.at(0), hb.data(), n * e);
    for (BinOp op : {BinOp::Sum, BinOp::Prod, BinOp::Max, BinOp::Min}) {
      for (size_t off : {size_t(0), e}) {  // aligned like b, then not
        std::vector<char> want(n * e);
        kernels::reduce(want.data(), ha.data(), hb.data(), n - 1, dt, op);
        if (off == 0) d.memcpy(A.at(0), ha.data(), n * e);
        d.launchReduce(s, D.at(off), A.at(off), B.at(0), n - 1, dt, op);
        d.synchronize(s);
        const std::vector<char> got = D.read();
        INFO("type " << typeName(dt) << " op " << int(op) << " misaligned " << (off != 0));
        CHECK(sameBytes(elems(got, off), want.data(), (n - 1) * e));
        if (off == 0) d.memcpy(A.at(e), ha.data(), (n - 1) * e);
      }
    }
    // PreMulSum's scale on random data, against the CPU kernel.
    std::vector<char> scalar(e), want(n * e);
    fromDouble(isFloat ? 0.75 : 3.0, scalar.data(), dt);
    kernels::scale(want.data(), hb.data(), n, dt, scalar.data());
    d.launchScale(s, D.at(0), B.at(0), n, dt, scalar.data());
    d.synchronize(s);
    const std::vector<char> got = D.read();
    INFO("scale: type " << typeName(dt));
    CHECK(sameBytes(elems(got, 0), want.data(), n * e));
  }
  d.destroyStream(s);
}

TEST_CASE("device streams: a flag wait holds later work, events and host functions keep order, pinned memory") {
  device::Device& d = dev();
  INFO("device: " << d.name());
  device::Stream s = d.createStream();
  CHECK(d.validStream(s));
  uint32_t* flag = d.allocFlag();
  std::atomic<int> order{0};
  const size_t n = 1 << 16;
  DeviceBuffer src(n * 4), dst(n * 4);
  std::vector<float> ones(n, 1.0f);
  d.memcpy(src.at(0), ones.data(), n * 4);
  d.streamWaitFlag(s, flag, 1);
  d.launchCopy(s, dst.at(0), src.at(0), n * 4);
  d.launchHostFunc(s, [&] { order = 1; });
  device::Event ev = d.createEvent();
  d.record(ev, s);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(order.load() == 0);
  CHECK_FALSE(d.query(ev));
  __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
  d.synchronize(s);
  CHECK(order.load() == 1);
  CHECK(d.query(ev));
  std::vector<float> back(n);
  d.memcpy(back.data(), dst.at(0), n * 4);
  CHECK(back == ones);
  // A second stream waits for an event of the first; the kernels read pinned host memory.
  device::Stream s2 = d.createStream();
  float* pinned = static_cast<float*>(d.mallocHost(n * 4));
  for (size_t i = 0; i < n; ++i) pinned[i] = float(i % 100);
  d.streamWaitFlag(s, flag, 2);
  d.launchReduce(s, dst.at(0), dst.at(0), pinned, n, hocclFloat, BinOp::Sum);
  d.record(ev, s);
  d.streamWaitEvent(s2, ev);
  d.launchCopy(s2, src.at(0), dst.at(0), n * 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(d.query(ev));
  __atomic_store_n(flag, 2u, __ATOMIC_RELEASE);
  d.synchronize(s2);
  d.memcpy(back.data(), src.at(0), n * 4);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += back[i] != 1.0f + float(i % 100);
  CHECK(wrong == 0);
  d.freeHost(pinned);
  d.destroyEvent(ev);
  d.freeFlag(flag);
  d.destroyStream(s2);
  d.destroyStream(s);
}

namespace {

// The one-kernel all-reduce's ranks as streams of this one device (kernels/device/one_shot_phases.h): each rank has its area
// (device memory, zeroed), an abort word and status slots (pinned host memory), and runs its launches on its own
// stream, so the ranks' kernels run at the same time as they would on the GPUs of one host.
struct OneShotRanks {
  static constexpr int kSlots = 64;  // status slots per rank, one per launch between resets
  explicit OneShotRanks(int n) : n(n) {
    device::Device& d = dev();
    const std::vector<char> zeros(one_shot::kAreaBytes, 0);
    for (int r = 0; r < n; ++r) {
      areas.push_back(static_cast<char*>(d.malloc(one_shot::kAreaBytes)));
      d.memcpy(areas.back(), zeros.data(), zeros.size());
      words.push_back(static_cast<uint32_t*>(d.mallocHost((1 + kSlots * one_shot::kStatusWords) * 4)));
      std::memset(words.back(), 0, (1 + kSlots * one_shot::kStatusWords) * 4);
      streams.push_back(d.createStream());
    }
  }
  ~OneShotRanks() {
    device::Device& d = dev();
    for (int r = 0; r < n; ++r) {
      d.synchronize(streams[r]);
      d.destroyStream(streams[r]);
      d.free(areas[r]);
      d.freeHost(words[r]);
    }
  }
  uint32_t* status(int r, uint64_t epoch) { return words[r] + 1 + (epoch % kSlots) * one_shot::kStatusWords; }
  // Rank r's launch of call `epoch` (the same on every rank that takes part).
  void launch(int r, uint64_t epoch, const void* in, void* out, size_t count, hocclDataType_t dt, BinOp op,
              uint64_t call = 7, uint64_t timeoutNs = 60'000'000'000ull) {
    one_shot::Args a;
    a.in = in;
    a.out = out;
    a.count = count;
    a.nranks = n;
    a.rank = r;
    a.epoch = epoch;
    a.call = call;
    for (int j = 0; j < n; ++j) a.areas[j] = areas[j];
    a.abort = words[r];
    a.status = status(r, epoch);
    std::memset(a.status, 0, one_shot::kStatusWords * 4);
    a.timeoutNs = timeoutNs;
    dev().launchOneShotAllReduce(streams[r], a, dt, op);
  }
  void synchronize() {
    for (int r = 0; r < n; ++r) dev().synchronize(streams[r]);
  }
  int n;
  std::vector<char*> areas;
  std::vector<uint32_t*> words;
  std::vector<device::Stream> streams;
};

}  // namespace

TEST_CASE("the one-kernel all-reduce: every type and op bit for bit against the CPU kernels in rank order",
          "[one_shot]") {
  device::Device& d = dev();
  INFO("device: " << d.name());
  const int n = 3;
  OneShotRanks ranks(n);
  std::mt19937_64 rng(29);
  uint64_t epoch = 0;
  for (int t = 0; t < hocclNumTypes; ++t) {
    const auto dt = static_cast<hocclDataType_t>(t);
    const size_t e = typeSize(dt), most = one_shot::kSlotBytes / e;
    for (size_t count : {size_t{1}, size_t{7}, size_t{1001}, most}) {
      // Every rank's input: random values (floats past fp16's and e4m3's range: saturation; integers: any bits, which
      // wrap).
      const bool isFloat = dt == hocclFloat16 || dt == hocclFloat32 || dt == hocclFloat64 || dt == hocclBfloat16 ||
                           dt == hocclFloat8e4m3 || dt == hocclFloat8e5m2;
      std::uniform_real_distribution<double> wide(-70000.0, 70000.0);
      std::vector<std::vector<char>> in(n, std::vector<char>(count * e));
      for (auto& v : in)
        for (size_t i = 0; i < count; ++i) {
          if (isFloat) {
            fromDouble(wide(rng) / double(1 << (rng() % 20)), v.data() + i * e, dt);
          } else {
            const uint64_t x = rng();
            std::memcpy(v.data() + i * e, &x, e);
          }
        }
      std::vector<char*> din(n), dout(n * 4);
      for (int r = 0; r < n; ++r) {
        din[r] = static_cast<char*>(d.malloc(count * e));
        d.memcpy(din[r], in[r].data(), count * e);
      }
      const BinOp ops[] = {BinOp::Sum, BinOp::Prod, BinOp::Max, BinOp::Min};
      for (int k = 0; k < 4; ++k)  // four calls in a row without a synchronisation: the slots' parities cycle
        for (int r = 0; r < n; ++r) {
          dout[r * 4 + k] = static_cast<char*>(d.malloc(count * e));
          ranks.launch(r, epoch + 1 + k, din[r], dout[r * 4 + k], count, dt, ops[k]);
        }
      ranks.synchronize();
      for (int k = 0; k < 4; ++k) {
        std::vector<char> want = in[0];
        for (int j = 1; j < n; ++j) kernels::reduce(want.data(), want.data(), in[j].data(), count, dt, ops[k]);
        for (int r = 0; r < n; ++r) {
          INFO("type " << typeName(dt) << ", " << count << " elements, op " << opName(ops[k]) << ", rank " << r);
          CHECK(ranks.status(r, epoch + 1 + k)[0] == one_shot::kDone);
          std::vector<char> got(count * e);
          d.memcpy(got.data(), dout[r * 4 + k], count * e);
          // The same bits, or NaN both (inf + -inf: the CPU's vector loops and the scalar functors may give NaNs of
          // different signs).
          auto same = [&](size_t i) {
            return std::memcmp(got.data() + i * e, want.data() + i * e, e) == 0 ||
                   (isFloat && std::isnan(toDouble(got.data() + i * e, dt)) &&
                    std::isnan(toDouble(want.data() + i * e, dt)));
          };
          size_t first = 0;
          while (first < count && same(first)) ++first;
          if (first < count)
            FAIL_CHECK("element " << first << ": got " << toDouble(got.data() + first * e, dt) << ", want "
                                  << toDouble(want.data() + first * e, dt));
          d.free(dout[r * 4 + k]);
        }
      }
      epoch += 4;
      for (char* p : din) d.free(p);
    }
  }
}

TEST_CASE("the one-kernel all-reduce: in place, a mismatch, a timeout, a failed peer and an abort end each launch",
          "[one_shot]") {
  device::Device& d = dev();
  INFO("device: " << d.name());
  const int n = 3;
  OneShotRanks ranks(n);
  const size_t count = 500;
  std::vector<float> host(count);
  std::vector<float*> buf(n);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) host[i] = float(r + 1) * float(i % 9);
    buf[r] = static_cast<float*>(d.malloc(count * sizeof(float)));
    d.memcpy(buf[r], host.data(), count * sizeof(float));
  }
  // In place.
  for (int r = 0; r < n; ++r) ranks.launch(r, 1, buf[r], buf[r], count, hocclFloat, BinOp::Sum);
  ranks.synchronize();
  for (int r = 0; r < n; ++r) {
    CHECK(ranks.status(r, 1)[0] == one_shot::kDone);
    d.memcpy(host.data(), buf[r], count * sizeof(float));
    for (size_t i = 0; i < count; ++i) REQUIRE(host[i] == 6.0f * float(i % 9));
  }
  // Rank 2 makes another call: nothing is read; every rank ends with a mismatch naming a rank whose call differs from
  // its own, or with a peer's failure whose code says mismatch (it stopped first) or peer failure (it stopped for a
  // third rank: rank 2 finds the mismatch, rank 0 stops for rank 2, rank 1 for rank 0); at least one finds it.
  std::vector<float> before(count);
  d.memcpy(before.data(), buf[0], count * sizeof(float));
  for (int r = 0; r < n; ++r) ranks.launch(r, 2, buf[r], buf[r], count, hocclFloat, BinOp::Sum, r == 2 ? 8 : 7);
  ranks.synchronize();
  int found = 0;
  for (int r = 0; r < n; ++r) {
    const uint32_t* st = ranks.status(r, 2);
    INFO("rank " << r << ": status " << st[0] << ", peer " << st[1] << ", detail " << st[2]);
    if (st[0] == one_shot::kMismatch) {
      ++found;
      CHECK(st[1] == (r == 2 ? 0u : 2u));
      CHECK(st[2] == (r == 2 ? 7u : 8u));  // the other's descriptor, low word
    } else {
      CHECK(st[0] == one_shot::kPeerFailed);
      CHECK((st[2] == one_shot::kMismatch || st[2] == one_shot::kPeerFailed));
    }
  }
  CHECK(found >= 1);
  d.memcpy(host.data(), buf[0], count * sizeof(float));
  CHECK(host == before);  // not reduced
  // A fresh set of ranks: rank 0 alone times out waiting for rank 1; then rank 1, alone too, sees rank 0 failed.
  OneShotRanks fresh(n);
  fresh.launch(0, 1, buf[0], buf[0], count, hocclFloat, BinOp::Sum, 7, 200'000'000ull);
  fresh.synchronize();
  CHECK(fresh.status(0, 1)[0] == one_shot::kTimeout);
  CHECK(fresh.status(0, 1)[1] == 1);
  fresh.launch(1, 1, buf[1], buf[1], count, hocclFloat, BinOp::Sum);
  fresh.synchronize();
  CHECK(fresh.status(1, 1)[0] == one_shot::kPeerFailed);
  CHECK(fresh.status(1, 1)[1] == 0);
  CHECK(fresh.status(1, 1)[2] == one_shot::kTimeout);
  // Another: rank 0 alone, stopped by its abort word.
  OneShotRanks again(n);
  again.launch(0, 1, buf[0], buf[0], count, hocclFloat, BinOp::Sum);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  __atomic_store_n(again.words[0], 1u, __ATOMIC_RELEASE);
  again.synchronize();
  CHECK(again.status(0, 1)[0] == one_shot::kAborted);
  for (float* p : buf) d.free(p);
}
