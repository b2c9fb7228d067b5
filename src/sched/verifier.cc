// The in-memory interpreter of schedules (see verifier.h).
#include "sched/verifier.h"

#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

namespace hoccl::sched {
namespace {

struct Message {
  std::vector<double> data;
  bool matched = false;
};

const char* primName(PrimKind k) {
  switch (k) {
    case PrimKind::Send: return "send";
    case PrimKind::Recv: return "recv";
    case PrimKind::RecvReduce: return "recvReduce";
    case PrimKind::Copy: return "copy";
    case PrimKind::Reduce: return "reduce";
    case PrimKind::Notify: return "notify";
    case PrimKind::Produce: return "produce";
  }
  return "?";
}

std::string where(int rank, size_t step, size_t prim, const Prim& p) {
  std::ostringstream os;
  os << "rank " << rank << " step " << step << " prim " << prim << " (" << primName(p.kind) << " peer " << p.peer
     << " src " << p.src << "+" << p.srcOff << " dst " << p.dst << "+" << p.dstOff << " count " << p.count << ")";
  return os.str();
}

// A resolved range of real memory: array index and [begin, end).
struct Span {
  int array;
  size_t begin, end;
  bool overlaps(const Span& o) const { return array == o.array && begin < o.end && o.begin < end; }
};

class Machine {
 public:
  Machine(const std::vector<Schedule>& s, std::vector<VerifyRank>& r, const VerifyOp& op, const VerifyCallbacks& cb)
      : sched_(s), ranks_(r), op_(op), cb_(cb), cur_(s.size(), 0), posted_(s.size(), false) {}

  void run() {
    const int n = static_cast<int>(sched_.size());
    for (int r = 0; r < n; ++r) checkRaces(r);
    while (true) {
      bool progress = false, allDone = true;
      for (int r = 0; r < n; ++r) {
        if (cur_[r] >= sched_[r].steps.size()) continue;
        allDone = false;
        progress |= advance(r);
      }
      if (allDone) return;
      if (!progress) throw std::runtime_error("deadlock: " + stateDump());
    }
  }

 private:
  Span span(int rank, uint16_t buf, size_t off, size_t count, const std::string& ctx) const {
    const VerifyRank& vr = ranks_[rank];
    if (buf >= vr.views.size() || vr.views[buf].array < 0)
      throw std::runtime_error("unbound buffer " + std::to_string(buf) + " at " + ctx);
    const auto& v = vr.views[buf];
    if (off + count > v.count)
      throw std::runtime_error("out of range (buffer has " + std::to_string(v.count) + " elements) at " + ctx);
    return {v.array, v.offset + off, v.offset + off + count};
  }

  double* ptr(int rank, const Span& s) { return ranks_[rank].arrays[s.array].data() + s.begin; }

  // Within one step, a prim may not write memory that another prim of the step reads or writes.
  void checkRaces(int r) {
    for (size_t k = 0; k < sched_[r].steps.size(); ++k) {
      const auto& prims = sched_[r].steps[k].prims;
      std::vector<std::pair<Span, size_t>> reads, writes;
      for (size_t i = 0; i < prims.size(); ++i) {
        const Prim& p = prims[i];
        std::string ctx = where(r, k, i, p);
        if (p.count == 0) continue;
        if (p.kind == PrimKind::Copy) {  // a copy onto itself (in-place aliasing) is skipped, as the executor does
          Span s = span(r, p.src, p.srcOff, p.count, ctx), d = span(r, p.dst, p.dstOff, p.count, ctx);
          if (s.array == d.array && s.begin == d.begin) continue;
        }
        if (p.kind != PrimKind::Recv && p.kind != PrimKind::Produce)
          reads.push_back({span(r, p.src, p.srcOff, p.count, ctx), i});
        if (p.kind != PrimKind::Send && p.kind != PrimKind::Notify)
          writes.push_back({span(r, p.dst, p.dstOff, p.count, ctx), i});
        if (p.kind == PrimKind::Reduce) reads.push_back({span(r, p.dst, p.dstOff, p.count, ctx), i});
      }
      for (const auto& [w, wi] : writes) {
        for (const auto& [o, oi] : writes)
          if (oi != wi && w.overlaps(o)) throw std::runtime_error("write/write race in " + where(r, k, wi, prims[wi]));
        for (const auto& [o, oi] : reads)
          if (oi != wi && w.overlaps(o)) throw std::runtime_error("read/write race in " + where(r, k, wi, prims[wi]));
      }
    }
  }

  bool advance(int r) {
    const Step& step = sched_[r].steps[cur_[r]];
    bool progress = false;
    if (!posted_[r]) {
      post(r, step);
      posted_[r] = true;
      progress = true;
    }
    bool complete = true;
    for (size_t i = 0; i < step.prims.size(); ++i) {
      const Prim& p = step.prims[i];
      if (p.kind == PrimKind::Send) {
        if (!queue(r, p.peer)[sendIndex_[r][i]].matched) complete = false;
      } else if (p.kind == PrimKind::Recv || p.kind == PrimKind::RecvReduce) {
        if (recvDone_[r][i]) continue;
        auto& q = queue(p.peer, r);
        size_t idx = recvIndex_[r][i];
        if (idx >= q.size()) {
          complete = false;
          continue;
        }
        Message& m = q[idx];
        std::string ctx = where(r, cur_[r], i, p);
        if (m.data.size() != p.count)
          throw std::runtime_error("size mismatch: peer sent " + std::to_string(m.data.size()) + " elements to " + ctx);
        Span d = span(r, p.dst, p.dstOff, p.count, ctx);
        if (p.kind == PrimKind::Recv) {
          std::copy(m.data.begin(), m.data.end(), ptr(r, d));
        } else {
          Span s = span(r, p.src, p.srcOff, p.count, ctx);
          std::vector<double> a(ptr(r, s), ptr(r, s) + p.count);
          double* out = ptr(r, d);
          for (size_t e = 0; e < p.count; ++e) out[e] = op_(a[e], m.data[e]);
        }
        m.matched = true;
        recvDone_[r][i] = true;
        progress = true;
      }
    }
    if (complete) {
      ++cur_[r];
      posted_[r] = false;
      progress = true;
    }
    return progress;
  }

  void post(int r, const Step& step) {
    sendIndex_[r].assign(step.prims.size(), 0);
    recvIndex_[r].assign(step.prims.size(), 0);
    recvDone_[r].assign(step.prims.size(), false);
    for (size_t i = 0; i < step.prims.size(); ++i) {
      const Prim& p = step.prims[i];
      std::string ctx = where(r, cur_[r], i, p);
      const int n = static_cast<int>(sched_.size());
      if ((p.kind == PrimKind::Send || p.kind == PrimKind::Recv || p.kind == PrimKind::RecvReduce) &&
          (p.peer < 0 || p.peer >= n || p.peer == r))
        throw std::runtime_error("bad peer at " + ctx);
      switch (p.kind) {
        case PrimKind::Send: {
          Span s = span(r, p.src, p.srcOff, p.count, ctx);
          auto& q = queue(r, p.peer);
          sendIndex_[r][i] = q.size();
          q.push_back(Message{std::vector<double>(ptr(r, s), ptr(r, s) + p.count), false});
          break;
        }
        case PrimKind::Recv:
        case PrimKind::RecvReduce: recvIndex_[r][i] = recvCount_[{p.peer, r}]++; break;
        case PrimKind::Copy: {
          Span s = span(r, p.src, p.srcOff, p.count, ctx), d = span(r, p.dst, p.dstOff, p.count, ctx);
          std::vector<double> tmp(ptr(r, s), ptr(r, s) + p.count);
          std::copy(tmp.begin(), tmp.end(), ptr(r, d));
          break;
        }
        case PrimKind::Reduce: {
          Span s = span(r, p.src, p.srcOff, p.count, ctx), d = span(r, p.dst, p.dstOff, p.count, ctx);
          for (size_t e = 0; e < p.count; ++e) ptr(r, d)[e] = op_(ptr(r, d)[e], ptr(r, s)[e]);
          break;
        }
        case PrimKind::Notify:
        case PrimKind::Produce: break;  // after every other prim of the step: see below
      }
    }
    // Callbacks run after the step's sends have taken their data (the executor's run while the transfers are in
    // flight; the race check above guarantees that no prim of the step touches what they write).
    for (size_t i = 0; i < step.prims.size(); ++i) {
      const Prim& p = step.prims[i];
      std::string ctx = where(r, cur_[r], i, p);
      if (p.kind == PrimKind::Notify) {
        Span s = span(r, p.src, p.srcOff, p.count, ctx);
        if (cb_.notify) cb_.notify(r, p.peer, ptr(r, s), p.count);
      } else if (p.kind == PrimKind::Produce) {
        Span d = span(r, p.dst, p.dstOff, p.count, ctx);
        if (cb_.produce) cb_.produce(r, p.peer, ptr(r, d), p.count);
      }
    }
  }

  std::deque<Message>& queue(int from, int to) { return queues_[{from, to}]; }

  std::string stateDump() const {
    std::ostringstream os;
    for (size_t r = 0; r < sched_.size(); ++r) {
      if (cur_[r] >= sched_[r].steps.size()) continue;
      os << "[rank " << r << " stuck in step " << cur_[r] << "/" << sched_[r].steps.size() << ": ";
      for (const auto& p : sched_[r].steps[cur_[r]].prims)
        os << primName(p.kind) << "(" << p.peer << "," << p.count << ") ";
      os << "] ";
    }
    return os.str();
  }

  const std::vector<Schedule>& sched_;
  std::vector<VerifyRank>& ranks_;
  const VerifyOp& op_;
  const VerifyCallbacks& cb_;
  std::vector<size_t> cur_;
  std::vector<bool> posted_;
  std::map<std::pair<int, int>, std::deque<Message>> queues_;
  std::map<std::pair<int, int>, size_t> recvCount_;
  std::map<int, std::vector<size_t>> sendIndex_, recvIndex_;
  std::map<int, std::vector<bool>> recvDone_;
};

bool rootOnlyOutput(Coll c) { return c == Coll::Reduce || c == Coll::Gather; }

}  // namespace

void verify(const std::vector<Schedule>& schedules, std::vector<VerifyRank>& ranks, const VerifyOp& op,
            const VerifyCallbacks& callbacks) {
  if (schedules.size() != ranks.size()) throw std::runtime_error("one schedule per rank expected");
  Machine(schedules, ranks, op, callbacks).run();
}

std::vector<std::vector<double>> runCollective(const std::vector<Schedule>& schedules, const CollArgs& args,
                                               const std::vector<std::vector<double>>& inputs, bool inPlace,
                                               const VerifyOp& op, const VerifyCallbacks& callbacks) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int n = args.nranks;
  std::vector<VerifyRank> ranks(n);
  for (int r = 0; r < n; ++r) {
    CollArgs a = args;
    a.rank = r;
    BufferCounts bc = bufferCounts(a);
    VerifyRank& vr = ranks[r];
    vr.views.resize(3);
    bool aliased = inPlace && (!rootOnlyOutput(args.coll) || r == args.root) &&
                   !(args.coll == Coll::Scatter && r != args.root);
    if (!aliased) {
      vr.arrays.push_back(inputs[r]);
      vr.arrays.push_back(std::vector<double>(bc.output, nan));
      vr.views[kInput] = {0, 0, bc.input};
      vr.views[kOutput] = {1, 0, bc.output};
    } else {
      size_t big = std::max(bc.input, bc.output);
      std::vector<double> mem(big, nan);
      // Where the input sits inside the shared buffer, as the C API defines in-place operation.
      size_t inOff = 0, outOff = 0;
      if (args.coll == Coll::AllGather || args.coll == Coll::Gather) inOff = static_cast<size_t>(r) * args.count;
      if (args.coll == Coll::ReduceScatter || args.coll == Coll::Scatter) outOff = static_cast<size_t>(r) * args.count;
      std::copy(inputs[r].begin(), inputs[r].end(), mem.begin() + inOff);
      vr.arrays.push_back(std::move(mem));
      vr.views[kInput] = {0, inOff, bc.input};
      vr.views[kOutput] = {0, outOff, bc.output};
    }
    vr.arrays.push_back(std::vector<double>(schedules[r].scratchCount, nan));
    vr.views[kScratch] = {static_cast<int>(vr.arrays.size()) - 1, 0, schedules[r].scratchCount};
  }
  verify(schedules, ranks, op, callbacks);
  std::vector<std::vector<double>> outputs(n);
  for (int r = 0; r < n; ++r) {
    const auto& v = ranks[r].views[kOutput];
    const auto& arr = ranks[r].arrays[v.array];
    outputs[r].assign(arr.begin() + v.offset, arr.begin() + v.offset + v.count);
  }
  return outputs;
}

std::vector<std::vector<double>> referenceCollective(const CollArgs& args, const std::vector<std::vector<double>>& in,
                                                     const VerifyOp& op) {
  const int n = args.nranks;
  const size_t c = args.count;
  std::vector<std::vector<double>> out(n);
  auto reduceAll = [&](size_t offset, size_t count) {
    std::vector<double> acc(in[0].begin() + offset, in[0].begin() + offset + count);
    for (int r = 1; r < n; ++r)
      for (size_t e = 0; e < count; ++e) acc[e] = op(acc[e], in[r][offset + e]);
    return acc;
  };
  for (int r = 0; r < n; ++r) {
    switch (args.coll) {
      case Coll::AllReduce: out[r] = reduceAll(0, c); break;
      case Coll::Reduce:
        if (r == args.root) out[r] = reduceAll(0, c);
        break;
      case Coll::Broadcast: out[r] = in[args.root]; break;
      case Coll::ReduceScatter: out[r] = reduceAll(static_cast<size_t>(r) * c, c); break;
      case Coll::AllGather:
        for (int q = 0; q < n; ++q) out[r].insert(out[r].end(), in[q].begin(), in[q].end());
        break;
      case Coll::Gather:
        if (r == args.root)
          for (int q = 0; q < n; ++q) out[r].insert(out[r].end(), in[q].begin(), in[q].end());
        break;
      case Coll::Scatter: out[r].assign(in[args.root].begin() + r * c, in[args.root].begin() + (r + 1) * c); break;
      case Coll::AlltoAll:
        for (int q = 0; q < n; ++q) out[r].insert(out[r].end(), in[q].begin() + r * c, in[q].begin() + (r + 1) * c);
        break;
    }
  }
  return out;
}

}  // namespace hoccl::sched
