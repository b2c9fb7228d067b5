// The simulated RDMA device of the tests (see fake_verbs.h). Everything is guarded by one mutex.
#include "fake_verbs.h"

#include <arpa/inet.h>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace hoccl::test {
namespace {

struct Cq {
  ibv_cq cq{};
  std::deque<ibv_wc> wcs;
};
struct Qp {
  ibv_qp qp{};
  ibv_qp_state state = IBV_QPS_RESET;
  uint32_t dest = 0;
  std::deque<uint64_t> recvs;
};
struct Op {  // a write on the wire
  uint32_t srcQpn;
  ibv_send_wr wr;
  std::vector<char> inlineData;
  uint64_t srcAddr;
  uint32_t len;
  uint32_t lkey = 0;
  uint64_t postedAt = 0;  ///< the poll count when posted
};

struct State {
  std::mutex mu;
  ibv_device device{};
  ibv_device* list[2] = {&device, nullptr};
  std::map<ibv_context*, std::unique_ptr<ibv_context>> contexts;
  std::map<ibv_pd*, std::unique_ptr<ibv_pd>> pds;
  std::map<uint32_t, std::unique_ptr<ibv_mr>> mrs;  // by key (lkey == rkey)
  std::map<int, int> mrAccess;
  std::map<ibv_cq*, std::unique_ptr<Cq>> cqs;
  std::map<uint32_t, std::unique_ptr<Qp>> qps;  // by qp number
  std::deque<Op> wire;
  uint32_t nextKey = 0x100;
  uint32_t nextQpn = 0x40;
  int failStatus = 0;
  int failCount = 0;
  size_t writes = 0;
  uint64_t polls = 0;    // completion-queue polls so far, by anyone
  uint64_t latency = 1;  // polls a write stays in flight
};
State* g = nullptr;

Cq* cqOf(ibv_cq* c) { return g->cqs.at(c).get(); }

void complete(ibv_cq* cq, uint64_t wrId, ibv_wc_status status, ibv_wc_opcode op, uint32_t qpn) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = op;
  wc.qp_num = qpn;
  cqOf(cq)->wcs.push_back(wc);
}

bool covers(uint32_t key, uint64_t addr, uint64_t len, bool remote) {
  auto it = g->mrs.find(key);
  if (it == g->mrs.end()) return false;
  if (remote && !(g->mrAccess[static_cast<int>(key)] & IBV_ACCESS_REMOTE_WRITE)) return false;
  const auto base = reinterpret_cast<uintptr_t>(it->second->addr);
  return addr >= base && addr + len <= base + it->second->length;
}

void fail(Qp* q, const Op& op, ibv_wc_status status) {
  q->state = IBV_QPS_ERR;
  complete(q->qp.send_cq, op.wr.wr_id, status, IBV_WC_RDMA_WRITE, q->qp.qp_num);
}

/// Carries out the queued writes, in order, that have stayed in flight for `latency` polls.
void runWire() {
  while (!g->wire.empty() && g->wire.front().postedAt + g->latency < g->polls) {
    Op op = std::move(g->wire.front());
    g->wire.pop_front();
    auto sit = g->qps.find(op.srcQpn);
    if (sit == g->qps.end()) continue;  // the sender is gone
    Qp* src = sit->second.get();
    if (src->state == IBV_QPS_ERR) {
      complete(src->qp.send_cq, op.wr.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, src->qp.qp_num);
      continue;
    }
    if (g->failCount > 0) {
      --g->failCount;
      fail(src, op, static_cast<ibv_wc_status>(g->failStatus));
      continue;
    }
    auto dit = g->qps.find(src->dest);
    if (dit == g->qps.end() || (dit->second->state != IBV_QPS_RTR && dit->second->state != IBV_QPS_RTS)) {
      fail(src, op, IBV_WC_RETRY_EXC_ERR);
      continue;
    }
    Qp* dst = dit->second.get();
    if (op.len && op.inlineData.empty() && !covers(op.lkey, op.srcAddr, op.len, false)) {
      fail(src, op, IBV_WC_LOC_PROT_ERR);
      continue;
    }
    if (op.len && !covers(op.wr.wr.rdma.rkey, op.wr.wr.rdma.remote_addr, op.len, true)) {
      fail(src, op, IBV_WC_REM_ACCESS_ERR);
      continue;
    }
    const bool imm = op.wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (imm && dst->recvs.empty()) {
      fail(src, op, IBV_WC_RNR_RETRY_EXC_ERR);
      continue;
    }
    const char* from = op.inlineData.empty() ? reinterpret_cast<const char*>(op.srcAddr) : op.inlineData.data();
    char* to = reinterpret_cast<char*>(op.wr.wr.rdma.remote_addr);
    if (op.len == 8 && reinterpret_cast<uintptr_t>(to) % 8 == 0) {  // a credit word: one aligned store
      uint64_t v;
      std::memcpy(&v, from, 8);
      __atomic_store_n(reinterpret_cast<uint64_t*>(to), v, __ATOMIC_RELEASE);
    } else if (op.len) {
      std::memcpy(to, from, op.len);
    }
    ++g->writes;
    if (imm) {
      ibv_wc wc{};
      wc.wr_id = dst->recvs.front();
      dst->recvs.pop_front();
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = op.wr.imm_data;
      wc.byte_len = op.len;
      wc.qp_num = dst->qp.qp_num;
      cqOf(dst->qp.recv_cq)->wcs.push_back(wc);
    }
    if (op.wr.send_flags & IBV_SEND_SIGNALED)
      complete(src->qp.send_cq, op.wr.wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, src->qp.qp_num);
  }
}

// Provider ops.
int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(g->mu);
  Qp* q = g->qps.at(qp->qp_num).get();
  for (; wr; wr = wr->next) {
    if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR) {
      *bad = wr;
      return EINVAL;
    }
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
      *bad = wr;
      return EINVAL;
    }
    Op op{qp->qp_num, *wr, {}, 0, 0, 0, g->polls};
    op.wr.next = nullptr;
    if (wr->num_sge > 1) {
      *bad = wr;
      return EINVAL;
    }
    if (wr->num_sge == 1) {  // the caller's sge may live on its stack: keep what is needed
      op.srcAddr = wr->sg_list->addr;
      op.len = wr->sg_list->length;
      op.lkey = wr->sg_list->lkey;
      if (wr->send_flags & IBV_SEND_INLINE)
        op.inlineData.assign(reinterpret_cast<const char*>(op.srcAddr),
                             reinterpret_cast<const char*>(op.srcAddr) + op.len);
    }
    op.wr.sg_list = nullptr;
    g->wire.push_back(std::move(op));
  }
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(g->mu);
  Qp* q = g->qps.at(qp->qp_num).get();
  for (; wr; wr = wr->next) {
    if (q->state == IBV_QPS_RESET) {
      *bad = wr;
      return EINVAL;
    }
    q->recvs.push_back(wr->wr_id);
  }
  return 0;
}

int pollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(g->mu);
  ++g->polls;
  runWire();
  Cq* c = cqOf(cq);
  int got = 0;
  while (got < n && !c->wcs.empty()) {
    wc[got++] = c->wcs.front();
    c->wcs.pop_front();
  }
  return got;
}

// Exported functions.
ibv_device** getDeviceList(int* n) {
  if (n) *n = 1;
  return g->list;
}
void freeDeviceList(ibv_device**) {}
const char* getDeviceName(ibv_device*) { return "fake_rxe0"; }
ibv_context* openDevice(ibv_device* d) {
  std::lock_guard<std::mutex> lock(g->mu);
  auto ctx = std::make_unique<ibv_context>();
  ctx->device = d;
  ctx->ops.post_send = postSend;
  ctx->ops.post_recv = postRecv;
  ctx->ops.poll_cq = pollCq;
  ctx->abi_compat = nullptr;  // not an extended context: port queries take the exported function
  ibv_context* raw = ctx.get();
  g->contexts[raw] = std::move(ctx);
  return raw;
}
int closeDevice(ibv_context* c) {
  std::lock_guard<std::mutex> lock(g->mu);
  return g->contexts.erase(c) ? 0 : EINVAL;
}
int queryDevice(ibv_context*, ibv_device_attr* a) {
  std::memset(a, 0, sizeof(*a));
  a->phys_port_cnt = 1;
  return 0;
}
int queryPort(ibv_context*, uint8_t port, _compat_ibv_port_attr* a) {
  if (port != 1) return EINVAL;
  auto* attr = reinterpret_cast<ibv_port_attr*>(a);  // the compat layout is a prefix of ibv_port_attr
  attr->state = IBV_PORT_ACTIVE;
  attr->active_mtu = IBV_MTU_4096;
  attr->lid = 7;
  attr->gid_tbl_len = 1;
  attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
  return 0;
}
int queryGid(ibv_context*, uint8_t, int index, ibv_gid* gid) {
  if (index != 0) return EINVAL;
  std::memset(gid, 0, sizeof(*gid));
  gid->raw[0] = 0xfe;
  gid->raw[1] = 0x80;
  gid->raw[15] = 7;
  return 0;
}
ibv_pd* allocPd(ibv_context* c) {
  std::lock_guard<std::mutex> lock(g->mu);
  auto pd = std::make_unique<ibv_pd>();
  pd->context = c;
  ibv_pd* raw = pd.get();
  g->pds[raw] = std::move(pd);
  return raw;
}
int deallocPd(ibv_pd* pd) {
  std::lock_guard<std::mutex> lock(g->mu);
  return g->pds.erase(pd) ? 0 : EINVAL;
}
ibv_mr* regMr(ibv_pd* pd, void* addr, size_t len, int access) {
  std::lock_guard<std::mutex> lock(g->mu);
  auto mr = std::make_unique<ibv_mr>();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = mr->rkey = g->nextKey++;
  g->mrAccess[static_cast<int>(mr->lkey)] = access;
  ibv_mr* raw = mr.get();
  g->mrs[raw->lkey] = std::move(mr);
  return raw;
}
int deregMr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(g->mu);
  return g->mrs.erase(mr->lkey) ? 0 : EINVAL;
}
ibv_cq* createCq(ibv_context* c, int cqe, void*, ibv_comp_channel*, int) {
  std::lock_guard<std::mutex> lock(g->mu);
  auto cq = std::make_unique<Cq>();
  cq->cq.context = c;
  cq->cq.cqe = cqe;
  ibv_cq* raw = &cq->cq;
  g->cqs[raw] = std::move(cq);
  return raw;
}
int destroyCq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(g->mu);
  return g->cqs.erase(cq) ? 0 : EINVAL;
}
ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* init) {
  std::lock_guard<std::mutex> lock(g->mu);
  if (init->qp_type != IBV_QPT_RC) return nullptr;
  auto q = std::make_unique<Qp>();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = init->send_cq;
  q->qp.recv_cq = init->recv_cq;
  q->qp.qp_num = g->nextQpn++;
  q->qp.qp_type = IBV_QPT_RC;
  init->cap.max_inline_data = 64;
  ibv_qp* raw = &q->qp;
  g->qps[raw->qp_num] = std::move(q);
  return raw;
}
int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard<std::mutex> lock(g->mu);
  Qp* q = g->qps.at(qp->qp_num).get();
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state want = attr->qp_state;
  const bool ok = (q->state == IBV_QPS_RESET && want == IBV_QPS_INIT) ||
                  (q->state == IBV_QPS_INIT && want == IBV_QPS_RTR && (mask & IBV_QP_DEST_QPN) && (mask & IBV_QP_AV) &&
                   (mask & IBV_QP_RQ_PSN) && (mask & IBV_QP_PATH_MTU)) ||
                  (q->state == IBV_QPS_RTR && want == IBV_QPS_RTS && (mask & IBV_QP_SQ_PSN) &&
                   (mask & IBV_QP_TIMEOUT) && (mask & IBV_QP_RETRY_CNT));
  if (!ok) return EINVAL;
  if (want == IBV_QPS_RTR) {
    if (attr->ah_attr.dlid == 0 || attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096) return EINVAL;
    q->dest = attr->dest_qp_num;
  }
  q->state = want;
  qp->state = want;
  return 0;
}
int destroyQp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(g->mu);
  return g->qps.erase(qp->qp_num) ? 0 : EINVAL;
}

}  // namespace

FakeVerbs::FakeVerbs() {
  if (g) throw std::logic_error("one FakeVerbs at a time");
  g = new State;
  std::strcpy(g->device.name, "fake_rxe0");
  transport::ibverbs::IbvLib t;
  t.get_device_list = getDeviceList;
  t.free_device_list = freeDeviceList;
  t.get_device_name = getDeviceName;
  t.open_device = openDevice;
  t.close_device = closeDevice;
  t.query_device = queryDevice;
  t.query_port_compat = queryPort;
  t.query_gid = queryGid;
  t.alloc_pd = allocPd;
  t.dealloc_pd = deallocPd;
  t.reg_mr = regMr;
  t.dereg_mr = deregMr;
  t.create_cq = createCq;
  t.destroy_cq = destroyCq;
  t.create_qp = createQp;
  t.modify_qp = modifyQp;
  t.destroy_qp = destroyQp;
  lib_ = transport::ibverbs::IbvLib::fromFunctions(t);
}

FakeVerbs::~FakeVerbs() {
  delete g;
  g = nullptr;
}

void FakeVerbs::failNextWrites(int status, int count) {
  std::lock_guard<std::mutex> lock(g->mu);
  g->failStatus = status;
  g->failCount = count;
}

size_t FakeVerbs::liveObjects() const {
  std::lock_guard<std::mutex> lock(g->mu);
  return g->contexts.size() + g->pds.size() + g->mrs.size() + g->cqs.size() + g->qps.size();
}

void FakeVerbs::setLatency(unsigned polls) {
  std::lock_guard<std::mutex> lock(g->mu);
  g->latency = polls;
}

size_t FakeVerbs::writes() const {
  std::lock_guard<std::mutex> lock(g->mu);
  return g->writes;
}

}  // namespace hoccl::test
