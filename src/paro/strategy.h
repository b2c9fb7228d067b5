/// @file strategy.h
/// PaRO strategies: one sharding level (N, I or G) for each of the three parts of a data-parallel training state
/// (parameters P, gradients G, optimizer states OS). Pure values, no communicator.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hoccl::paro {

/// How one part of the training state is kept.
enum class Level : unsigned char {
  N = 0,  ///< no sharding: every rank holds all of it
  I = 1,  ///< intra-group sharding: split over the m ranks of a group, replicated in every group
  G = 2,  ///< global sharding: split over all ranks, no redundancy
};

/// The three parts of the training state, in the order of the strategy letters.
enum class State : unsigned char {
  Params = 0,  ///< P: parameters (2 bytes/element in bf16)
  Grads = 1,   ///< G: gradients (2 bytes/element)
  Optim = 2,   ///< OS: optimizer states (12 bytes/element for mixed-precision Adam)
};

/// Letter of a level: 'N', 'I' or 'G'.
char levelLetter(Level level);
/// Short name of a state: "P", "G" or "OS".
const char* stateName(State state);

/// A PaRO strategy: the level of P, G and OS.
struct Strategy {
  Level p = Level::N;   ///< parameters
  Level g = Level::N;   ///< gradients
  Level os = Level::N;  ///< optimizer states
  /// The level of one state.
  Level of(State state) const;
  /// The three letters, e.g. "IIG".
  std::string name() const;
  /// The usual name where one exists ("ZeRO-3" for GGG, ...), else "".
  std::string alias() const;
  /// Equality.
  bool operator==(const Strategy& o) const { return p == o.p && g == o.g && os == o.os; }
  /// Inequality.
  bool operator!=(const Strategy& o) const { return !(*this == o); }
};

/// Parses three letters N/I/G (any case) or an alias: ddp=NNN, zero1=NNG, zero2=NGG, zero3=GGG, mics=hsdp=III.
/// Throws hoccl::Error(hocclInvalidArgument) naming the bad text and listing what is accepted.
Strategy parseStrategy(std::string_view text);
/// All 27 strategies, in letter order (NNN, NNI, NNG, NIN, ...).
std::vector<Strategy> allStrategies();

}  // namespace hoccl::paro
