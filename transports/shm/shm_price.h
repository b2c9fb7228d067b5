/// @file shm_price.h
/// What the shm shortcuts cost (their predictSeconds), as free functions of the call, the ranks of the host and the
/// link model, so that the tuner's tests can price them without an arena. The parameters are the model's
/// (topology/link_model.h): the arena hand-off (LinkModel::handoff), the cross-process copy rate
/// (LinkModel::kernelCopy, or LinkModel::mappedCopy over registered buffers) and the reduction rate (LinkModel::reduceRate), each measured by `hoccl-model calibrate` or
/// derived from the intra-host link; with more ranks on the host than LinkModel::cores, every one of them is
/// crowded (LinkModel::crowded) as the schedules' predictions are, and a shortcut's wait for its peers, which has
/// nothing to block on, naps once per arena round where the ranks' wait policy is Block (base/wait.h).
#pragma once

#include "topology/link_model.h"
#include "transports/shortcut.h"

namespace hoccl::transport::shm {

/// What one arena round's wait costs beyond the hand-off on a host of `nranks` ranks: a Block policy's first nap
/// (Backoff::blockMicros) where chooseWaitPolicy gives Block for nranks ranks on model.cores cores, else 0 (and 0
/// when model.cores is 0: unknown).
double roundWaitSeconds(int nranks, const topo::LinkModel& model);

/// The small shortcut (shm_small.h): one arena round, then every rank reads every payload and combines them.
double smallSeconds(const CollCall& call, int nranks, const topo::LinkModel& model);

/// The single-copy shortcut (shm_single_copy.h): two arena rounds around each rank's cross-process copies and its
/// reduction; `registered`: every rank's buffers are registered, so the copies run over mappings (zero copy)
/// instead of through the kernel.
double singleCopySeconds(const CollCall& call, int nranks, const topo::LinkModel& model, bool registered);

}  // namespace hoccl::transport::shm
