/// @file probe_link.h
/// Blocking point-to-point on one of the communicator's channels, for the probes that run inside communicator
/// initialisation (comm/topo_probe.h, comm/tune_probe.h) before any collective can run: posts, then progresses
/// the channel until everything posted is complete, with the communicator's deadline (HOCCL_TIMEOUT) and abort flag.
#pragma once

#include <cstddef>

#include "transports/transport.h"

namespace hoccl {

class Communicator;

/// One peer's channel, used blockingly. The peer must be connected (Communicator::connect).
class ProbeLink {
 public:
  /// `purpose` names the probe in messages ("topology probe"); `turnOff` says how to switch it off
  /// ("HOCCL_TOPO_PROBE=0").
  ProbeLink(Communicator& comm, int peer, const char* purpose, const char* turnOff);
  /// Posts a send of bytes from data (kept alive by the caller until wait()).
  void send(const void* data, size_t bytes);
  /// Posts a receive of exactly bytes into data.
  void recv(void* data, size_t bytes);
  /// Progresses until every posted operation is complete. Throws Timeout naming the peer after HOCCL_TIMEOUT,
  /// or the communicator's error when it is aborted or a peer failed.
  void wait(const char* what);

 private:
  Communicator& comm_;
  int peer_;
  const char* purpose_;
  const char* turnOff_;
  transport::Channel& ch_;
};

}  // namespace hoccl
