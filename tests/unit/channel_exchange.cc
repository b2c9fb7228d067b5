// Channel driving and the many-message exchange of the transport unit tests (see channel_exchange.h).
#include "channel_exchange.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::test {

using transport::Channel;
using transport::RecvTarget;
using Clock = std::chrono::steady_clock;

void drive(const std::vector<Channel*>& chans, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  unsigned idle = 0;
  while (true) {
    bool moved = false, pending = false;
    for (Channel* ch : chans) {
      moved = ch->progress() || moved;
      pending = pending || ch->pending() > 0;
    }
    if (!pending) return;
    if (moved) {
      idle = 0;
      continue;
    }
    ++idle;
    if (idle < 64) continue;
    if (idle < 96) {
      sched_yield();
      continue;
    }
    for (size_t k = 0; k < chans.size(); ++k) {
      Channel* ch = chans[(idle + k) % chans.size()];
      if (ch->pending()) {
        ch->waitForActivity(500);
        break;
      }
    }
    if (Clock::now() > deadline) {
      std::string left;
      for (size_t k = 0; k < chans.size(); ++k)
        left += fmt::format("{}channel {}: {} pending", k ? ", " : "", k, chans[k]->pending());
      throw std::runtime_error("drive: timed out with operations still pending (" + left + ")");
    }
  }
}

std::vector<unsigned char> payload(int from, int to, size_t index, size_t bytes) {
  std::mt19937_64 gen((static_cast<uint64_t>(from) << 40) ^ (static_cast<uint64_t>(to) << 20) ^ index ^ bytes);
  std::vector<unsigned char> v(bytes);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t x = gen();
    std::memcpy(&v[i], &x, 8);
  }
  for (; i < bytes; ++i) v[i] = static_cast<unsigned char>(gen());
  return v;
}

void exchangeMany(const std::map<int, std::unique_ptr<Channel>>& channels, int rank, int count,
                  const MessageElements& elements, std::chrono::seconds limit) {
  struct Msg {
    size_t bytes, granule;
    bool sink;
  };
  auto plan = [&](int from, int to) {  // both sides compute the same plan for a direction
    std::mt19937 gen(static_cast<unsigned>(from * 7919 + to * 104729));
    std::vector<Msg> msgs;
    for (int i = 0; i < count; ++i) {
      size_t granule = size_t{1} << (gen() % 4);
      size_t elems = elements(i, granule, gen);
      msgs.push_back({elems * granule, granule, gen() % 2 == 0});
    }
    return msgs;
  };
  std::map<int, std::vector<std::vector<unsigned char>>> out, in;
  std::map<int, std::vector<size_t>> sunk;
  std::string sinkError;
  std::vector<Channel*> list;
  for (auto& [p, ch] : channels) {
    list.push_back(ch.get());
    auto sendPlan = plan(rank, p), recvPlan = plan(p, rank);
    in[p].resize(count);
    sunk[p].assign(count, 0);
    for (int i = 0; i < count; ++i) {
      out[p].push_back(payload(rank, p, 1000 + i, sendPlan[i].bytes));
      in[p][i].assign(recvPlan[i].bytes, 0);
    }
    for (int i = 0; i < count; ++i) {
      const Msg& m = recvPlan[i];
      if (!m.sink) {
        ch->postRecv(m.bytes, RecvTarget{in[p][i].data(), {}, m.granule});
      } else {
        unsigned char* dst = in[p][i].data();
        size_t* got = &sunk[p][i];
        size_t g = m.granule;
        RecvTarget t;
        t.granule = g;
        t.sink = [dst, got, g, &sinkError](const void* data, size_t offset, size_t len) {
          if (offset != *got || len == 0 || len % g != 0)
            sinkError = fmt::format("sink piece offset {} len {} (expected offset {}, granule {})", offset, len, *got,
                                    g);
          std::memcpy(dst + offset, data, len);
          *got += len;
        };
        ch->postRecv(m.bytes, std::move(t));
      }
      ch->postSend(out[p][i].data(), sendPlan[i].bytes);
    }
  }
  drive(list, limit);
  if (!sinkError.empty()) throw std::runtime_error(sinkError);
  for (auto& [p, ch] : channels)
    for (int i = 0; i < count; ++i)
      if (in[p][i] != payload(p, rank, 1000 + i, in[p][i].size()))
        throw std::runtime_error(
            fmt::format("message {} ({} bytes) from rank {} arrived corrupted", i, in[p][i].size(), p));
}

namespace {

// Sends `bytes` with `tag` and drives the channel for up to 3 s: the receiver may give up on the message (a mismatch),
// so the rest of it may never be taken.
void sendToReceiverThatMayGiveUp(Channel& ch, const void* data, size_t bytes, transport::CallTag tag) {
  ch.postTaggedSend(data, bytes, tag);
  try {
    drive({&ch}, std::chrono::seconds(3));
  } catch (const std::exception&) {
  }
}

constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0xA5;

// Posts `target` for `posted` bytes (its buffer, or what its sink fills, is `in`: `posted` bytes then kGuardBytes of
// kGuardByte), drives the channel for up to 10 s, and reports the error it threw, if any, and whether the guard bytes
// are intact.
MismatchOutcome receiveGuarded(Channel& ch, size_t posted, RecvTarget target, const std::vector<unsigned char>& in) {
  MismatchOutcome outcome;
  ch.postRecv(posted, std::move(target));
  try {
    drive({&ch}, std::chrono::seconds(10));
  } catch (const Error& e) {
    outcome.code = e.code();
    outcome.error = e.what();
  }
  for (size_t i = posted; i < in.size(); ++i) outcome.guardIntact = outcome.guardIntact && in[i] == kGuardByte;
  return outcome;
}

}  // namespace

MismatchOutcome exchangeMismatched(Channel& ch, int rank, size_t sent, size_t posted) {
  MismatchOutcome outcome;
  if (rank == 0) {
    std::vector<unsigned char> out(sent, 7);
    sendToReceiverThatMayGiveUp(ch, out.data(), sent, 0);
    return outcome;
  }
  std::vector<unsigned char> in(posted + kGuardBytes, kGuardByte);
  return receiveGuarded(ch, posted, RecvTarget{in.data(), {}, 1}, in);
}

MismatchOutcome exchangeTagged(Channel& ch, int rank, size_t bytes, transport::CallTag sendTag,
                               transport::CallTag recvTag, bool sink, bool* intact) {
  MismatchOutcome outcome;
  std::vector<unsigned char> payload(bytes);
  std::mt19937 rng(static_cast<unsigned>(bytes) * 31u + sendTag);  // the same bytes on both sides
  for (unsigned char& c : payload) c = static_cast<unsigned char>(rng());
  if (rank == 0) {
    sendToReceiverThatMayGiveUp(ch, payload.data(), bytes, sendTag);
    return outcome;
  }
  std::vector<unsigned char> in(bytes + kGuardBytes, kGuardByte);
  RecvTarget target;
  if (sink) target.sink = [&in](const void* data, size_t off, size_t len) { std::memcpy(in.data() + off, data, len); };
  else target.direct = in.data();
  target.tag = recvTag;
  outcome = receiveGuarded(ch, bytes, std::move(target), in);
  *intact = outcome.code == 0 && std::equal(payload.begin(), payload.end(), in.begin());
  return outcome;
}

std::string taggedProblems(const MismatchOutcome& seen, bool intact, bool mismatch, const std::string& peer) {
  std::string problems;
  if (!seen.guardIntact) problems += "; wrote past its buffer";
  if (mismatch) {
    if (seen.code != hocclInvalidUsage) problems += fmt::format("; code {} instead of hocclInvalidUsage", seen.code);
    if (seen.error.find("belongs to another call") == std::string::npos) problems += "; not called another call's";
    if (!peer.empty() && seen.error.find(peer) == std::string::npos) problems += "; does not name " + peer;
  } else {
    if (seen.code != 0) problems += fmt::format("; failed with code {}", seen.code);
    if (!intact) problems += "; the bytes did not arrive intact";
  }
  return problems.empty() ? problems : problems.substr(2);
}

}  // namespace hoccl::test
