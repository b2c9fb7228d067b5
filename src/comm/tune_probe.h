/// @file tune_probe.h
/// The tuning probe (HOCCL_TUNE_PROBE=1): at communicator init, rank 0 measures latency and bandwidth to one peer
/// of each link class with short probes (the method of `hoccl-model calibrate`, docs/model.md, cut to fit a time
/// budget), and every rank receives rank 0's result through the bootstrap, so every rank's tuner prices with the
/// same model and picks the same algorithm.
#pragma once

#include <string>

#include "topology/link_model.h"
#include "topology/topology.h"

namespace hoccl {

class Communicator;

/// What the probe measured, identical on every rank.
struct TuneProbeResult {
  topo::LinkModel model;  ///< the model every rank's tuner uses
  double seconds = 0;     ///< how long rank 0's probes took
  std::string summary;    ///< one line for logs: what was measured, with which peer
};

/// Whether the probe should run: HOCCL_TUNE_PROBE=1 and more than one rank. Every rank decides the same as long as
/// the environment is the same (the probe is collective).
bool tuneProbeWanted(const topo::Topology& topo);

/// Runs the probe over comm's channels (collective: every rank of comm calls it, after the channels are set up).
/// Starts from topo::LinkModel::fromParams() and replaces what was measured, except values set explicitly with
/// HOCCL_LINK_*. Bounded in time: it stops measuring 0.5 s after the start, up to one exchange of each kind already
/// begun (classes not started keep their values; the first, inter-switch where there is one, always runs). Throws
/// Timeout naming the peer when a probed rank stops answering (HOCCL_TIMEOUT).
TuneProbeResult probeLinkModel(Communicator& comm);

}  // namespace hoccl
