// The flight recorder's ring buffer (src/comm/flight_recorder.h): ids, wrap-around keeps the newest K in order,
// updates of overwritten entries are ignored, state timings, the untimed end of small calls, writers and a reader on
// several threads, capacity 0, the JSON form, HOCCL_TRACE_DUMP's %r/%p substitution and a dump of every live
// recorder. Also the mismatch check's pure parts (src/comm/call_check.h): the
// default policy and how a fingerprint reads in messages.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/call_check.h"
#include "comm/flight_recorder.h"

using namespace hoccl;

namespace {

TraceEntry collective(int64_t seq, size_t count) {
  TraceEntry e;
  e.seq = seq;
  e.coll = Coll::AllReduce;
  e.count = count;
  e.bytes = count * 4;
  e.op = hocclSum;
  e.algorithm = "ring";
  return e;
}

}  // namespace

TEST_CASE("the ring keeps the newest K operations, oldest first") {
  FlightRecorder rec(4, "tag", "name", 1, 2);
  for (int i = 0; i < 10; ++i) REQUIRE(rec.record(collective(i, 100 + i), TraceState::Running) == uint64_t(i));
  REQUIRE(rec.total() == 10);
  auto entries = rec.snapshot();
  REQUIRE(entries.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(entries[i].id == 6 + i);
    CHECK(entries[i].seq == int64_t(6 + i));
    CHECK(entries[i].count == 106 + i);
  }
  // An overwritten entry is not touched by a late update; a kept one is.
  rec.update(2, TraceState::Failed);
  rec.update(9, TraceState::Done, "small");
  entries = rec.snapshot();
  for (const auto& e : entries) CHECK(e.state == (e.id == 9 ? TraceState::Done : TraceState::Running));
  CHECK(std::string(entries.back().algorithm) == "small");
  CHECK(entries.back().endNs >= entries.back().startNs);
  CHECK(entries.back().startNs > 0);
}

TEST_CASE("fewer operations than the capacity, and states with their times") {
  FlightRecorder rec(8, "tag", "", 0, 2);
  const uint64_t a = rec.record(collective(-1, 5), TraceState::Enqueued);
  const uint64_t b = rec.record(collective(0, 6), TraceState::Running);
  auto entries = rec.snapshot();
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].state == TraceState::Enqueued);
  CHECK(entries[0].startNs == 0);
  CHECK(entries[0].enqueuedNs > 0);
  rec.update(a, TraceState::Running, "direct", 7);
  rec.update(b, TraceState::Failed);
  entries = rec.snapshot();
  CHECK(entries[0].seq == 7);
  CHECK(entries[0].startNs >= entries[0].enqueuedNs);
  CHECK(entries[0].endNs == 0);
  CHECK(entries[1].state == TraceState::Failed);
  CHECK(entries[1].endNs >= entries[1].startNs);
}

TEST_CASE("doneUntimed ends a running entry as done without an end time") {
  FlightRecorder rec(4, "tag", "", 0, 2);
  const uint64_t a = rec.record(collective(0, 1), TraceState::Running);
  const uint64_t b = rec.record(collective(1, 2), TraceState::Running);
  rec.doneUntimed(a);
  auto entries = rec.snapshot();
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].state == TraceState::Done);
  CHECK(entries[0].endNs == 0);
  CHECK(entries[0].startNs > 0);
  CHECK(entries[1].state == TraceState::Running);  // b is still running
  // A timed update after an untimed end keeps the later state (a failure reported late wins).
  rec.update(a, TraceState::Failed);
  CHECK(rec.snapshot()[0].state == TraceState::Failed);
  // A mark is for one id: the entry that reuses the slot is not ended by the mark of the one it overwrote.
  rec.doneUntimed(b);
  uint64_t last = b;
  for (int i = 0; i < 4; ++i) last = rec.record(collective(2 + i, 3), TraceState::Running);  // wraps past a and b
  entries = rec.snapshot();
  REQUIRE(entries.size() == 4);
  for (const auto& e : entries) CHECK(e.state == TraceState::Running);
  // A late mark of an overwritten id changes nothing.
  rec.doneUntimed(a);
  for (const auto& e : rec.snapshot()) CHECK(e.state == TraceState::Running);
  rec.doneUntimed(last);
  const auto j = nlohmann::json::parse(rec.toJson());
  const auto& newest = j["entries"][3];
  CHECK(newest["state"] == "done");
  CHECK(newest["end_ns"] == 0);
  CHECK_FALSE(newest.contains("duration_us"));
}

TEST_CASE("record, update and snapshot from several threads at once keep every entry whole") {
  FlightRecorder rec(16, "tag", "", 0, 2);
  constexpr int kPerThread = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&rec, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t id = rec.record(collective(t, 1000 * t + 7), TraceState::Running);
        if (i % 2) rec.doneUntimed(id);
        else rec.update(id, TraceState::Done);
      }
    });
  for (int i = 0; i < 200; ++i)
    for (const auto& e : rec.snapshot()) {
      // Each entry is one thread's, never a mix of two: its count and seq name the same thread.
      REQUIRE(e.seq >= 0);
      REQUIRE(e.seq < 3);
      REQUIRE(e.count == size_t(1000 * e.seq + 7));
    }
  for (auto& t : threads) t.join();
  CHECK(rec.total() == 3 * kPerThread);
  for (const auto& e : rec.snapshot()) CHECK(e.state == TraceState::Done);
}

TEST_CASE("capacity 0 records nothing") {
  FlightRecorder rec(0, "tag", "", 0, 1);
  CHECK_FALSE(rec.enabled());
  rec.record(collective(0, 1), TraceState::Running);
  rec.update(0, TraceState::Done);
  rec.doneUntimed(0);
  CHECK(rec.snapshot().empty());
  CHECK(rec.total() == 0);
}

TEST_CASE("the JSON form names the call, its state and its timings") {
  FlightRecorder rec(2, "abc-1", "mine", 3, 4);
  const uint64_t id = rec.record(collective(0, 100), TraceState::Running);
  rec.update(id, TraceState::Done);
  TraceEntry s;
  s.kind = TraceEntry::Kind::Send;
  s.peer = 2;
  s.count = 8;
  s.dtype = hocclInt32;
  rec.record(s, TraceState::Enqueued);
  const auto j = nlohmann::json::parse(rec.toJson());
  CHECK(j["comm_id"] == "abc-1");
  CHECK(j["rank"] == 3);
  CHECK(j["nranks"] == 4);
  REQUIRE(j["entries"].size() == 2);
  CHECK(j["entries"][0]["call"] == "AllReduce(count=100, float, sum)");
  CHECK(j["entries"][0]["state"] == "done");
  CHECK(j["entries"][0]["seq"] == 0);
  CHECK(j["entries"][0]["algorithm"] == "ring");
  CHECK(j["entries"][0]["duration_us"].get<double>() >= 0);
  CHECK(j["entries"][1]["call"] == "Send(count=8, int32, peer 2)");
  CHECK(j["entries"][1]["state"] == "enqueued");
}

TEST_CASE("HOCCL_TRACE_DUMP: %r and %p, and a dump of every live recorder") {
  const std::string dir = "/tmp/hoccl-test-trace-" + std::to_string(getpid());
  setenv("HOCCL_TRACE_DUMP", (dir + ".%r.%p.json").c_str(), 1);
  CHECK(FlightRecorder::dumpPath(5) == dir + ".5." + std::to_string(getpid()) + ".json");
  {
    FlightRecorder a(4, "one", "", 2, 3), b(4, "two", "", 0, 1);
    a.record(collective(0, 1), TraceState::Running);
    const std::string path = FlightRecorder::dumpAll("unit test", 2);
    REQUIRE(path == FlightRecorder::dumpPath(2));
    std::ifstream f(path);
    const auto doc = nlohmann::json::parse(f);
    CHECK(doc["format"] == "hoccl-trace/1");
    CHECK(doc["reason"] == "unit test");
    int found = 0;
    for (const auto& c : doc["communicators"]) found += c["comm_id"] == "one" || c["comm_id"] == "two";
    CHECK(found == 2);
    std::remove(path.c_str());
  }
  unsetenv("HOCCL_TRACE_DUMP");
  CHECK(FlightRecorder::dumpAll("unset") == "");
}

TEST_CASE("mismatch check: the default policy and the fingerprint's description") {
  CHECK_FALSE(mismatchCheckWanted(0, 0, 1 << 30));
  CHECK(mismatchCheckWanted(2, 1000, 8));
  CHECK(mismatchCheckWanted(1, 0, 8));
  CHECK(mismatchCheckWanted(1, kCheckFirstCalls - 1, 8));
  CHECK_FALSE(mismatchCheckWanted(1, kCheckFirstCalls, 8));
  CHECK_FALSE(mismatchCheckWanted(1, kCheckFirstCalls, kCheckMinBytes - 1));
  CHECK(mismatchCheckWanted(1, 1u << 20, kCheckMinBytes));
  CallFingerprint f;
  f.seq = 3;
  f.count = 100;
  f.coll = static_cast<uint8_t>(Coll::Broadcast);
  f.dtype = hocclInt32;
  f.root = 1;
  f.ncoll = 2;
  std::snprintf(f.algorithm, sizeof(f.algorithm), "small");
  CHECK(describeFingerprint(f) ==
        "call #3 Broadcast(count=100, int32, root 1) [small] and 1 more collective(s) in a group");
}
