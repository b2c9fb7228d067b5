/// @file hoccl.h
/// The public C API of hoccl: NCCL 2.28 semantics with the `hoccl` prefix and NCCL's enum values.
/// This header needs no CUDA headers: streams are opaque `hocclStream_t` handles (a `cudaStream_t` cast to it).
#ifndef HOCCL_HOCCL_H_
#define HOCCL_HOCCL_H_

#include <limits.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Library version: 0.1.0.
#define HOCCL_MAJOR 0
#define HOCCL_MINOR 1
#define HOCCL_PATCH 0
/// Version code as returned by hocclGetVersion (MAJOR*10000 + MINOR*100 + PATCH).
#define HOCCL_VERSION_CODE (HOCCL_MAJOR * 10000 + HOCCL_MINOR * 100 + HOCCL_PATCH)

/// Opaque communicator handle.
typedef struct hocclComm* hocclComm_t;
/// The null communicator.
#define HOCCL_COMM_NULL NULL
/// Opaque stream handle: a cudaStream_t (or one of hocclStreamCreate); NULL is the device's default stream.
/// Calls on device buffers are stream-ordered: they are enqueued and return without waiting for peers, start after
/// the work queued earlier on the stream, and work queued later waits for them. Calls on host buffers complete before
/// they return. See docs/cuda.md.
typedef struct hocclStreamOpaque* hocclStream_t;

/// Size of the unique id in bytes.
#define HOCCL_UNIQUE_ID_BYTES 128
/// The job's unique id: magic, version, root address and port, 128-bit secret. Passed by value.
typedef struct {
  char internal[HOCCL_UNIQUE_ID_BYTES];
} hocclUniqueId;

/// Result codes (same values as ncclResult_t).
typedef enum {
  hocclSuccess = 0,
  hocclUnhandledCudaError = 1,
  hocclSystemError = 2,
  hocclInternalError = 3,
  hocclInvalidArgument = 4,
  hocclInvalidUsage = 5,
  hocclRemoteError = 6,
  hocclInProgress = 7,
  hocclTimeout = 8,  ///< a wait gave up after HOCCL_TIMEOUT seconds (a peer never arrived or stopped answering)
  hocclNumResults = 9
} hocclResult_t;

/// Reduction operations (same values as ncclRedOp_t). Values >= hocclNumOps are dynamic (PreMulSum) ops.
typedef enum {
  hocclSum = 0,
  hocclProd = 1,
  hocclMax = 2,
  hocclMin = 3,
  hocclAvg = 4,
  hocclNumOps = 5,
  hocclMaxRedOp = 0x7fffffff
} hocclRedOp_t;

/// Data types (same values as ncclDataType_t).
typedef enum {
  hocclInt8 = 0,
  hocclChar = 0,
  hocclUint8 = 1,
  hocclInt32 = 2,
  hocclInt = 2,
  hocclUint32 = 3,
  hocclInt64 = 4,
  hocclUint64 = 5,
  hocclFloat16 = 6,
  hocclHalf = 6,
  hocclFloat32 = 7,
  hocclFloat = 7,
  hocclFloat64 = 8,
  hocclDouble = 8,
  hocclBfloat16 = 9,
  hocclFloat8e4m3 = 10,
  hocclFloat8e5m2 = 11,
  hocclNumTypes = 12
} hocclDataType_t;

/// Where the PreMulSum scalar lives: 0 device (or host) pointer read at call time, 1 host value read at creation.
typedef enum { hocclScalarDevice = 0, hocclScalarHostImmediate = 1 } hocclScalarResidence_t;

/// Marks a config field as "not set".
#define HOCCL_CONFIG_UNDEF_INT INT_MIN
/// Marks a config pointer field as "not set".
#define HOCCL_CONFIG_UNDEF_PTR NULL
/// Color that leaves a rank out of hocclCommSplit (it gets HOCCL_COMM_NULL).
#define HOCCL_SPLIT_NOCOLOR -1
/// Magic value of a valid hocclConfig_t.
#define HOCCL_CONFIG_MAGIC 0xcafebeef

/// Communicator configuration, laid out like ncclConfig_t (2.28): read by its size and version.
typedef struct hocclConfig_v1 {
  size_t size;              ///< sizeof(hocclConfig_t) as the caller compiled it
  unsigned int magic;       ///< HOCCL_CONFIG_MAGIC
  unsigned int version;     ///< version code of the caller's header
  int blocking;             ///< 1 (default): init blocks; 0: init returns hocclInProgress, poll CommGetAsyncError
  int cgaClusterSize;       ///< accepted and ignored (GPU launch tuning)
  int minCTAs;              ///< accepted and ignored
  int maxCTAs;              ///< accepted and ignored
  const char* netName;      ///< accepted and ignored (tcp is the only transport between hosts today)
  int splitShare;           ///< hocclCommSplit: 1 = use the parent's connections (docs/transports.md), 0 = own ones
  int trafficClass;         ///< accepted and ignored
  const char* commName;     ///< a name shown in logs, NULL = none
  int collnetEnable;        ///< accepted and ignored
  int CTAPolicy;            ///< accepted and ignored
  int shrinkShare;          ///< accepted and ignored
  int nvlsCTAs;             ///< accepted and ignored
  int nChannelsPerNetPeer;  ///< accepted and ignored
  int nvlinkCentricSched;   ///< accepted and ignored
} hocclConfig_t;

/// Initializer for hocclConfig_t: sets size, magic and version, everything else "undefined".
#define HOCCL_CONFIG_INITIALIZER                                                                                   \
  {                                                                                                                \
    sizeof(hocclConfig_t), HOCCL_CONFIG_MAGIC, HOCCL_VERSION_CODE, HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_INT, \
        HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_PTR, HOCCL_CONFIG_UNDEF_INT,            \
        HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_PTR, HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_INT,            \
        HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_INT, HOCCL_CONFIG_UNDEF_INT             \
  }

/// Returns the version code of the library (HOCCL_VERSION_CODE).
hocclResult_t hocclGetVersion(int* version);
/// Creates a unique id on the root rank: opens the bootstrap listener and draws a 128-bit secret.
hocclResult_t hocclGetUniqueId(hocclUniqueId* uniqueId);
/// Creates a communicator of nranks ranks; every rank calls it with the same id and its own rank.
hocclResult_t hocclCommInitRank(hocclComm_t* comm, int nranks, hocclUniqueId commId, int rank);
/// Like hocclCommInitRank with a configuration (may be NULL); config->blocking = 0 makes it non-blocking.
hocclResult_t hocclCommInitRankConfig(hocclComm_t* comm, int nranks, hocclUniqueId commId, int rank,
                                      hocclConfig_t* config);
/// Like hocclCommInitRankConfig with several unique ids (roots) spreading the first contact, as NCCL's
/// ncclCommInitRankScalable: rank r joins the root of commIds[floor(r * nIds / nranks)], so each id serves a
/// contiguous share of the ranks; the first rank of each share must have created its id (hocclGetUniqueId in its own
/// process), and every rank passes the same nIds ids in the same order. The roots link up into one communicator
/// (the first id's root decides failures for all). 1 <= nIds <= nranks; config may be NULL.
hocclResult_t hocclCommInitRankScalable(hocclComm_t* comm, int nranks, int rank, int nIds, hocclUniqueId* commIds,
                                        hocclConfig_t* config);
/// Creates ndev communicators of one clique in this process (one rank per entry; devlist may be NULL).
/// Each communicator must then be driven by its own thread, or all of them inside one group.
hocclResult_t hocclCommInitAll(hocclComm_t* comms, int ndev, const int* devlist);
/// Creates communicators from the launcher environment: rank and size from hoccl-run, torchrun, Open MPI, PMIx,
/// MPICH or Slurm, the root from HOCCL_COMM_ID or the launcher (docs/launchers.md). hoccl extension.
hocclResult_t hocclCommInitFromEnv(hocclComm_t* comm, int* rank, int* nranks);
/// Creates rank `rank` of `nranks` with the bootstrap root at HOCCL_COMM_ID (host:port, served by rank 0), else where
/// the launcher's variables put it, and the secret from HOCCL_AUTH_TOKEN (else derived from the launcher's job id,
/// docs/launchers.md); also for several ranks per process (threads). hoccl extension.
hocclResult_t hocclCommInitRankFromEnv(hocclComm_t* comm, int nranks, int rank);
/// Splits comm: ranks with the same color form a new communicator ordered by key (then old rank). Non-blocking when
/// config->blocking = 0, or config is NULL and comm was made non-blocking: returns hocclInProgress with *newcomm set
/// (NULL for HOCCL_SPLIT_NOCOLOR); comm and *newcomm then report through hocclCommGetAsyncError.
hocclResult_t hocclCommSplit(hocclComm_t comm, int color, int key, hocclComm_t* newcomm, hocclConfig_t* config);
/// Waits until every operation of comm has completed (on every rank). For a non-blocking comm it returns
/// hocclInProgress and completes in the background (poll hocclCommGetAsyncError).
hocclResult_t hocclCommFinalize(hocclComm_t comm);
/// Frees a communicator.
hocclResult_t hocclCommDestroy(hocclComm_t comm);
/// Stops every operation of comm (safe from another thread, never blocks on a dead peer) and frees it.
hocclResult_t hocclCommAbort(hocclComm_t comm);
/// Returns the asynchronous state of comm (hocclInProgress while a non-blocking init, split or finalize runs, an
/// error after a failure).
hocclResult_t hocclCommGetAsyncError(hocclComm_t comm, hocclResult_t* asyncError);
/// Number of ranks in comm.
hocclResult_t hocclCommCount(const hocclComm_t comm, int* count);
/// Device of comm: the ordinal of the process's device (CUDA, or 0 for the simulated device), -1 when there is none.
hocclResult_t hocclCommCuDevice(const hocclComm_t comm, int* device);
/// Rank of the caller in comm.
hocclResult_t hocclCommUserRank(const hocclComm_t comm, int* rank);

/// Creates a PreMulSum op: sum of inputs each multiplied by *scalar (of type datatype) first.
hocclResult_t hocclRedOpCreatePreMulSum(hocclRedOp_t* op, void* scalar, hocclDataType_t datatype,
                                        hocclScalarResidence_t residence, hocclComm_t comm);
/// Destroys an op made by hocclRedOpCreatePreMulSum.
hocclResult_t hocclRedOpDestroy(hocclRedOp_t op, hocclComm_t comm);

/// Reduces count elements of every rank's sendbuff into recvbuff of every rank.
hocclResult_t hocclAllReduce(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                             hocclRedOp_t op, hocclComm_t comm, hocclStream_t stream);
/// Copies count elements of root's sendbuff into every rank's recvbuff.
hocclResult_t hocclBroadcast(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                             hocclComm_t comm, hocclStream_t stream);
/// Reduces count elements of every rank into root's recvbuff.
hocclResult_t hocclReduce(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, hocclRedOp_t op,
                          int root, hocclComm_t comm, hocclStream_t stream);
/// Gathers sendcount elements of every rank into recvbuff (rank r's at offset r*sendcount) on every rank.
hocclResult_t hocclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, hocclDataType_t datatype,
                             hocclComm_t comm, hocclStream_t stream);
/// Reduces nranks*recvcount elements; rank r receives block r (recvcount elements).
hocclResult_t hocclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, hocclDataType_t datatype,
                                 hocclRedOp_t op, hocclComm_t comm, hocclStream_t stream);
/// Sends block j (count elements) of sendbuff to rank j, receives rank j's block into block j of recvbuff.
hocclResult_t hocclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype,
                            hocclComm_t comm, hocclStream_t stream);
/// Gathers count elements of every rank into root's recvbuff (rank r's at offset r*count).
hocclResult_t hocclGather(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                          hocclComm_t comm, hocclStream_t stream);
/// Sends block r (count elements) of root's sendbuff to rank r.
hocclResult_t hocclScatter(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int root,
                           hocclComm_t comm, hocclStream_t stream);
/// Sends count elements to peer (matched with the peer's hocclRecv in call order).
hocclResult_t hocclSend(const void* sendbuff, size_t count, hocclDataType_t datatype, int peer, hocclComm_t comm,
                        hocclStream_t stream);
/// Receives count elements from peer.
hocclResult_t hocclRecv(void* recvbuff, size_t count, hocclDataType_t datatype, int peer, hocclComm_t comm,
                        hocclStream_t stream);

/// Starts a group: calls until the matching hocclGroupEnd are only recorded, then run together.
hocclResult_t hocclGroupStart(void);
/// Ends a group and runs its calls (send/recv pairs inside a group never deadlock, whatever their order).
hocclResult_t hocclGroupEnd(void);

/// The process's device, for messages and headers ("CUDA device 0 (...)" or "simulated device 0 (...)"); *name is
/// NULL when there is none. The string stays valid until the next call on this thread. hoccl extension.
hocclResult_t hocclDeviceName(const char** name);
/// Allocates bytes of memory on the process's device (hocclInvalidArgument without one). hoccl extension, for programs
/// without the CUDA runtime (and the simulated device, HOCCL_DEVICE=sim).
hocclResult_t hocclDeviceMalloc(void** ptr, size_t bytes);
/// Frees memory of hocclDeviceMalloc (NULL is ignored). hoccl extension.
hocclResult_t hocclDeviceFree(void* ptr);
/// Copies bytes between host and device memory in any direction; returns when done. Not ordered after any stream's
/// work: synchronise the stream that produced src first (hocclStreamSynchronize). hoccl extension.
hocclResult_t hocclDeviceMemcpy(void* dst, const void* src, size_t bytes);
/// Creates a stream of the process's device. hoccl extension.
hocclResult_t hocclStreamCreate(hocclStream_t* stream);
/// Destroys a stream of hocclStreamCreate once its queued work has run. hoccl extension.
hocclResult_t hocclStreamDestroy(hocclStream_t stream);
/// Waits until the work queued on stream (NULL: the default stream) has run; reports the first failure of that work.
/// A collective's own failure is reported by hocclCommGetAsyncError and the communicator's next call. hoccl extension.
hocclResult_t hocclStreamSynchronize(hocclStream_t stream);

/// Link classes, cheapest first: used by the byte counters and the cost model.
typedef enum {
  hocclLinkSelf = 0,         ///< a rank to itself (local copies)
  hocclLinkIntraHost = 1,    ///< ranks on the same host
  hocclLinkIntraSwitch = 2,  ///< different hosts under the same switch
  hocclLinkInterSwitch = 3,  ///< hosts under different switches
  hocclNumLinkClasses = 4
} hocclLinkClass_t;

/// Bytes a communicator moved since creation (or the last reset), by link class. hoccl extension.
typedef struct {
  unsigned long long bytesSent[hocclNumLinkClasses];      ///< payload bytes sent to peers of each class
  unsigned long long bytesReceived[hocclNumLinkClasses];  ///< payload bytes received from peers of each class
} hocclCommCounters_t;

/// Reads the byte counters of comm. hoccl extension.
hocclResult_t hocclCommGetCounters(hocclComm_t comm, hocclCommCounters_t* counters);
/// Sets the byte counters of comm to zero. hoccl extension.
hocclResult_t hocclCommResetCounters(hocclComm_t comm);
/// Host index (0..nhosts-1, numbered by first rank) and switch index of `rank` in comm. hoccl extension.
hocclResult_t hocclCommRankLocation(hocclComm_t comm, int rank, int* hostIndex, int* switchIndex);
/// The transport that carries comm's traffic to `peer` ("shm", "tcp", "ucx", ...; "self" for comm's own rank), as
/// chosen at init (HOCCL_NET, HOCCL_SHM_DISABLE); the text lives as long as comm. hoccl extension.
hocclResult_t hocclCommPeerTransport(hocclComm_t comm, int peer, const char** name);

/// A human-readable string for a result code.
const char* hocclGetErrorString(hocclResult_t result);
/// The last error message of this thread (comm may be NULL), or "" if none.
const char* hocclGetLastError(hocclComm_t comm);

/* ---- Launchers (issue 14, track launch; docs/launchers.md) ---- */

/// The launcher that started this process, as launcher-style init reads it (hoccl-run, torchrun, Open MPI, PMIx,
/// MPICH/Hydra, Slurm; docs/launchers.md): this process's rank, the number of processes, its rank among the
/// processes of its host and their number (-1 when the launcher does not say) and the launcher's name (valid until
/// this thread's next call). Without a launcher: *nranks = 0, *launcher = NULL. A partial or malformed launcher
/// environment is an error naming the variables read. Any pointer may be NULL. hoccl extension.
hocclResult_t hocclGetLauncherRank(int* rank, int* nranks, int* localRank, int* localSize, const char** launcher);

/* ---- Communication hidden behind compute (overlap track, issue 18; docs/overlap.md) ---------------------------- */

/// The per-block callback of hocclAllGatherOverlap: rank `srcRank`'s block (`count` elements of the call's datatype)
/// is complete at `block`, which points into the call's recvbuff (at srcRank * sendcount; NULL may be passed when
/// count is 0). Called once per rank, own block first, then in the order the ring delivers them
/// (hocclAllGatherOverlap), on the thread that called hocclAllGatherOverlap, one call at a time, while the transfer
/// of the next block is in flight. The callback may read the block (and any block already handed to it) and do any
/// compute of its own; it must not write recvbuff or sendbuff, and must not call hoccl on the same communicator
/// (such calls fail with hocclInvalidUsage; hocclCommAbort from the callback would wait for it forever). Return 0 to
/// go on; any other value (or a C++ exception) stops the operation: see hocclAllGatherOverlap.
typedef int (*hocclBlockCallback_t)(void* user, int srcRank, const void* block, size_t count);

/// The produce callback of hocclReduceScatterOverlap: write this rank's contribution to rank `dstRank`'s block,
/// `count` elements of the call's datatype, at `block`, which points into the call's sendbuff (at dstRank *
/// recvcount; NULL may be passed when count is 0). Called once per destination, in the order that hides the
/// transfers (hocclReduceScatterOverlap), on the thread that called hocclReduceScatterOverlap, one call at a time;
/// every call but the first runs while a transfer is in flight. The callback may write exactly that block and read
/// anything of its own; it must not touch recvbuff or other blocks of sendbuff, and must not call hoccl on the same
/// communicator (refused with hocclInvalidUsage). Return 0 to go on; any other value (or a C++ exception) stops the
/// operation: see hocclReduceScatterOverlap.
typedef int (*hocclProduceCallback_t)(void* user, int dstRank, void* block, size_t count);

/// All-gather that hands each rank's block to `onBlock` as soon as it has arrived, own block first, while the next
/// transfer is already in flight, so that compute on the blocks hides the communication (CommFuse-style). Same
/// buffers and result as hocclAllGather (in place when sendbuff == recvbuff + rank * sendcount). The blocks come in
/// the ring's order: own, then the rank before this one on the topology ring (host by host), and so on; every rank
/// gets exactly nranks calls (count 0 included). Host memory only for now: device buffers give hocclInvalidArgument.
/// Not inside a group (hocclInvalidUsage). If the callback returns non-zero or throws, the call fails on this rank
/// with hocclInvalidUsage and a message naming the callback, its value and the block; the communicator is then
/// broken and every other rank's call fails with hocclRemoteError naming this rank (never a hang). `stream` is
/// accepted for symmetry and ignored (host buffers: the call returns when done). hoccl extension.
hocclResult_t hocclAllGatherOverlap(const void* sendbuff, void* recvbuff, size_t sendcount, hocclDataType_t datatype,
                                    hocclComm_t comm, hocclStream_t stream, hocclBlockCallback_t onBlock, void* user);

/// Reduce-scatter that asks `produce` for this rank's contribution to each destination's block just before the ring
/// needs it, reduces the partial sums as they arrive, and leaves the reduced block of this rank in recvbuff
/// (recvcount elements), like hocclReduceScatter over the produced sendbuff (nranks * recvcount elements, a
/// workspace: blocks are written by `produce` only; in place when recvbuff == sendbuff + rank * recvcount). The
/// produce order is the rank before this one on the topology ring, then the one before that, ..., own block last; the
/// first produce runs before any transfer, every later one while a transfer is in flight, and after the last only the
/// transfer that ran during it and a local reduction remain. Every op of hocclReduceScatter (PreMulSum scales each
/// block after it was produced). Host memory only, not inside a group, callback failures as hocclAllGatherOverlap.
/// hoccl extension.
hocclResult_t hocclReduceScatterOverlap(void* sendbuff, void* recvbuff, size_t recvcount, hocclDataType_t datatype,
                                        hocclRedOp_t op, hocclComm_t comm, hocclStream_t stream,
                                        hocclProduceCallback_t produce, void* user);

/// Ring shift (PrimePar-style temporal partitioning): sends count elements of sendbuff to rank (rank + k) mod nranks
/// and receives count elements from rank (rank - k) mod nranks into recvbuff. k is any int, taken modulo nranks
/// (negative shifts go the other way; k = 0 or a multiple of nranks copies sendbuff to recvbuff). sendbuff ==
/// recvbuff is allowed (staged through scratch); partly overlapping buffers are refused. Host memory only; returns
/// when done. hoccl extension.
hocclResult_t hocclRingShift(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int k,
                             hocclComm_t comm, hocclStream_t stream);

/// A nonblocking operation in flight (hocclRingShiftStart), completed and freed by hocclWait.
typedef struct hocclRequest* hocclRequest_t;

/// Starts hocclRingShift and returns at once with *request set: the transfer runs on a background thread, so the
/// caller can compute meanwhile (double buffering: shift buffer A into B while computing on A, then swap). Until
/// hocclWait: sendbuff may be read but not written, recvbuff not touched, and no other hoccl call may use comm
/// (hocclInvalidUsage; hocclCommDestroy too), except hocclCommAbort, which stops the transfer (hocclWait then reports
/// it). Argument errors are reported here and leave *request NULL. hoccl extension.
hocclResult_t hocclRingShiftStart(const void* sendbuff, void* recvbuff, size_t count, hocclDataType_t datatype, int k,
                                  hocclComm_t comm, hocclStream_t stream, hocclRequest_t* request);
/// Sets *done to 1 when the operation of request has finished (successfully or not; hocclWait says which), else 0.
/// Never blocks. hoccl extension.
hocclResult_t hocclTest(hocclRequest_t request, int* done);
/// Waits until the operation of request has finished, frees request (it must not be used again) and returns the
/// operation's result (its message through hocclGetLastError). Honours HOCCL_TIMEOUT like every wait. hoccl extension.
hocclResult_t hocclWait(hocclRequest_t request);

/* ---- zero-copy on one host (issue 16) ---- */
/// Allocates `size` bytes of memory for collectives, as NCCL's ncclMemAlloc. In a process with a device (a GPU, or
/// the simulated device of HOCCL_DEVICE=sim): device memory of that device (calls on it are stream-ordered). Without
/// one: page-aligned host memory (0: one page) that the other ranks of a communicator on the same host can map, and
/// collectives whose buffers come from here and are registered (hocclCommRegister) on every rank read and write each
/// other's buffers directly. Free with hocclMemFree.
hocclResult_t hocclMemAlloc(void** ptr, size_t size);
/// Frees memory of hocclMemAlloc (NULL: nothing); anything else is hocclInvalidArgument. Host memory:
/// hocclInvalidUsage, nothing freed, while a collective uses it. Device memory: free it once the streams of the calls
/// that use it have been synchronised (as hocclDeviceFree).
hocclResult_t hocclMemFree(void* ptr);
/// Registers [buff, buff+size) with comm; *handle names the registration. Host memory only. Memory of hocclMemAlloc
/// registered on every rank of a host is used in place by the shm transport; for other memory registration changes
/// nothing about how data moves. Local: no other rank takes part.
hocclResult_t hocclCommRegister(hocclComm_t comm, void* buff, size_t size, void** handle);
/// Removes a registration of hocclCommRegister. hocclInvalidUsage, registration kept, while a collective uses it.
hocclResult_t hocclCommDeregister(hocclComm_t comm, void* handle);

/* ---- one-sided puts and signals on one host (issue 13) ---- */
/// A window: a range of every rank's memory registered together (hocclCommWindowRegister), which the other ranks of
/// the host can write with hocclPutSignal.
typedef struct hocclWindow* hocclWindow_t;
/// Signal indices per communicator: sigIdx of the calls below is in [0, HOCCL_ONE_SIDED_SIGNALS).
#define HOCCL_ONE_SIDED_SIGNALS 8
/// Contexts per communicator: ctx of the calls below is in [0, HOCCL_ONE_SIDED_CONTEXTS).
#define HOCCL_ONE_SIDED_CONTEXTS 4
/// What hocclWaitSignal waits for: opCnt more signals from rank `peer` on (sigIdx, ctx).
typedef struct {
  int opCnt;   ///< signals to wait for (and consume); 0: nothing
  int peer;    ///< the rank that sends them
  int sigIdx;  ///< signal index, [0, HOCCL_ONE_SIDED_SIGNALS)
  int ctx;     ///< context, [0, HOCCL_ONE_SIDED_CONTEXTS)
} hocclWaitSignalDesc_t;
/// Registers [buff, buff+size) of every rank as one window; collective (every rank calls it, in the same order with
/// its own buffer and size, which may differ). The ranks swap their sizes and where their buffers lie, so a put is
/// checked against the size of the target's part. Peers on this host can put into a rank's part when it is memory
/// of hocclMemAlloc (else only the rank itself can). Also a registration as hocclCommRegister makes. Fails on every
/// rank when one rank's part is refused (that rank says why). hoccl extension (NCCL's ncclCommWindowRegister).
hocclResult_t hocclCommWindowRegister(hocclComm_t comm, void* buff, size_t size, hocclWindow_t* win);
/// Removes a window of hocclCommWindowRegister (local; peers' puts already returned are complete).
hocclResult_t hocclCommWindowDeregister(hocclComm_t comm, hocclWindow_t win);
/// Copies count elements of datatype from localbuff into the part of win that rank `peer` registered, at byte
/// `peerWinOffset`, then adds one to peer's signal (sigIdx, ctx) from this rank. Host memory; returns when both are
/// done (the peer's hocclWaitSignal that sees the signal sees the data). The peer must be on this host and its part
/// memory of hocclMemAlloc (or be this rank); offset + bytes must lie within its part; flags must be 0. Nothing is
/// written when a check fails. hoccl extension (NCCL's ncclPutSignal).
hocclResult_t hocclPutSignal(const void* localbuff, size_t count, hocclDataType_t datatype, int peer, hocclWindow_t win,
                             size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, hocclComm_t comm);
/// Adds one to peer's signal (sigIdx, ctx) from this rank, after every put of this rank before it. Needs a window
/// registered on comm (the signals are set up with the first). hoccl extension (NCCL's ncclSignal).
hocclResult_t hocclSignal(int peer, int sigIdx, int ctx, unsigned int flags, hocclComm_t comm);
/// Waits until, for every descriptor, opCnt more signals than were consumed before came from its peer, then consumes
/// them. Honours HOCCL_TIMEOUT (hocclTimeout naming the peer and the signal, nothing consumed), and reports a dead
/// or aborted peer (hocclRemoteError). hoccl extension (NCCL's ncclWaitSignal).
hocclResult_t hocclWaitSignal(int nDesc, const hocclWaitSignalDesc_t* descs, hocclComm_t comm);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // HOCCL_HOCCL_H_
