/// @file paro.h
/// PaRO group-mapper (hoccl extension): partial-redundancy sharding of a data-parallel training state.
///
/// A strategy is three letters for parameters (P), gradients (G) and optimizer states (OS), each N (every rank
/// holds all of it), I (split over the m ranks of a group: a host or a switch; replicated in every group) or G
/// (split over all N ranks). Aliases: ddp=NNN, zero1=NNG, zero2=NGG, zero3=GGG, mics=hsdp=III.
///
/// Buffers: a full buffer of `count` elements is padded to hocclParoPaddedCount(count) elements (a multiple of N;
/// keep the padding zero); the shard of a state is the range hocclParoShardRange returns inside it. Every call below
/// takes the real `count` and buffers of those sizes. Reductions are sums (divide by N yourself for a mean).
/// All calls are collective over the communicator given to hocclParoCreate: every rank calls them in the same order.
#ifndef HOCCL_PARO_H_
#define HOCCL_PARO_H_

#include <stddef.h>

#include "hoccl/hoccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Opaque PaRO handle: the strategy, the group layout and the intra-group, inter-group and global communicators.
typedef struct hocclParo* hocclParo_t;

/// What a PaRO group is.
typedef enum {
  hocclParoGroupHost = 0,    ///< the ranks of one host (default)
  hocclParoGroupSwitch = 1,  ///< the ranks of the hosts under one switch
} hocclParoGroupLevel_t;

/// The three parts of the training state.
typedef enum {
  hocclParoParams = 0,  ///< P: parameters
  hocclParoGrads = 1,   ///< G: gradients
  hocclParoOptim = 2,   ///< OS: optimizer states
} hocclParoState_t;

/// The communicators of a PaRO handle.
typedef enum {
  hocclParoCommIntra = 0,   ///< the m ranks of this rank's group, ordered by local index
  hocclParoCommInter = 1,   ///< the redundancy group: one rank per group with this rank's local index
  hocclParoCommGlobal = 2,  ///< all ranks (created only when the strategy needs it, else HOCCL_COMM_NULL)
} hocclParoComm_t;

/// Checks a strategy name (three letters N/I/G, any case, or an alias) and writes the three capital letters and a
/// terminating zero to canonical (4 bytes). hocclInvalidArgument for anything else (hocclGetLastError says why).
hocclResult_t hocclParoStrategyParse(const char* strategy, char canonical[4]);

/// Creates a PaRO handle over comm (collective: every rank of comm calls it with the same strategy and level).
/// Splits comm into the intra-group and inter-group communicators (and a global one for strategies that all-reduce
/// unsharded gradients). Groups of unequal size fall back to groups of one rank, with a warning.
hocclResult_t hocclParoCreate(hocclComm_t comm, const char* strategy, hocclParoGroupLevel_t level, hocclParo_t* paro);
/// Destroys the handle and its communicators (collective). comm itself is not touched.
hocclResult_t hocclParoDestroy(hocclParo_t paro);

/// The group size m, the number of groups, this rank's group and local index.
hocclResult_t hocclParoGetLayout(hocclParo_t paro, int* groupSize, int* ngroups, int* group, int* localIndex);
/// One of the handle's communicators (HOCCL_COMM_NULL for a global one the strategy does not need). Owned by the
/// handle: do not destroy it.
hocclResult_t hocclParoGetComm(hocclParo_t paro, hocclParoComm_t which, hocclComm_t* comm);
/// The padded size of a full buffer of count elements (count rounded up to a multiple of the rank count).
hocclResult_t hocclParoPaddedCount(hocclParo_t paro, size_t count, size_t* padded);
/// The element range [*offset, *offset + *length) of the padded buffer that this rank keeps of state.
hocclResult_t hocclParoShardRange(hocclParo_t paro, hocclParoState_t state, size_t count, size_t* offset,
                                  size_t* length);

/// Gathers the full parameters (padded count) from this rank's P shard (forward and again in backward).
hocclResult_t hocclParoGatherParams(hocclParo_t paro, const void* paramShard, void* fullParams, size_t count,
                                    hocclDataType_t datatype, hocclStream_t stream);
/// After a micro-step's backward: reduces this rank's full gradient (padded count) to the G shard (sum over the
/// group for I, over all ranks for G; a copy for N). Accumulate the results over the micro-steps yourself.
hocclResult_t hocclParoReduceGrads(hocclParo_t paro, const void* fullGrad, void* gradShard, size_t count,
                                   hocclDataType_t datatype, hocclStream_t stream);
/// At the accumulation boundary: turns the accumulated G shard into the OS shard of the gradient summed over all
/// ranks and micro-steps (the optimizer's input).
hocclResult_t hocclParoSyncGrads(hocclParo_t paro, const void* gradShard, void* optimGrad, size_t count,
                                 hocclDataType_t datatype, hocclStream_t stream);
/// After the optimizer step: rebuilds this rank's P shard from the updated parameters of its OS shard.
hocclResult_t hocclParoRebuildParams(hocclParo_t paro, const void* optimParams, void* paramShard, size_t count,
                                     hocclDataType_t datatype, hocclStream_t stream);

/// Bytes each rank sends in one training step of A = microSteps micro-steps, as the library's ring algorithms move
/// them, for `count` parameters (all trainable) of elemBytes bytes: what the counters below should read.
hocclResult_t hocclParoPredictBytes(hocclParo_t paro, size_t count, size_t elemBytes, int microSteps,
                                    unsigned long long* bytesPerRank);
/// Byte counters summed over the handle's communicators.
hocclResult_t hocclParoGetCounters(hocclParo_t paro, hocclCommCounters_t* counters);
/// Resets the counters of the handle's communicators.
hocclResult_t hocclParoResetCounters(hocclParo_t paro);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // HOCCL_PARO_H_
