// PaRO strategy names: three letters for P, G, OS, plus the usual aliases.
#include "paro/strategy.h"

#include <fmt/format.h>

#include <cctype>

#include "base/error.h"

namespace hoccl::paro {

char levelLetter(Level level) {
  switch (level) {
    case Level::N: return 'N';
    case Level::I: return 'I';
    case Level::G: return 'G';
  }
  return '?';
}

const char* stateName(State state) {
  switch (state) {
    case State::Params: return "P";
    case State::Grads: return "G";
    case State::Optim: return "OS";
  }
  return "?";
}

Level Strategy::of(State state) const {
  switch (state) {
    case State::Params: return p;
    case State::Grads: return g;
    case State::Optim: return os;
  }
  return p;
}

std::string Strategy::name() const { return {levelLetter(p), levelLetter(g), levelLetter(os)}; }

std::string Strategy::alias() const {
  const std::string n = name();
  if (n == "NNN") return "DDP";
  if (n == "NNG") return "ZeRO-1";
  if (n == "NGG") return "ZeRO-2";
  if (n == "GGG") return "ZeRO-3";
  if (n == "III") return "MiCS/HSDP";
  return "";
}

namespace {

bool parseLevel(char c, Level* out) {
  switch (std::toupper(static_cast<unsigned char>(c))) {
    case 'N': *out = Level::N; return true;
    case 'I': *out = Level::I; return true;
    case 'G': *out = Level::G; return true;
    default: return false;
  }
}

}  // namespace

Strategy parseStrategy(std::string_view text) {
  std::string lower;
  for (char c : text) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "ddp") return Strategy{Level::N, Level::N, Level::N};
  if (lower == "zero1") return Strategy{Level::N, Level::N, Level::G};
  if (lower == "zero2") return Strategy{Level::N, Level::G, Level::G};
  if (lower == "zero3") return Strategy{Level::G, Level::G, Level::G};
  if (lower == "mics" || lower == "hsdp") return Strategy{Level::I, Level::I, Level::I};
  Strategy s;
  if (text.size() == 3 && parseLevel(text[0], &s.p) && parseLevel(text[1], &s.g) && parseLevel(text[2], &s.os))
    return s;
  throwInvalidArgument(fmt::format(
      "PaRO strategy '{}' is not valid: give three letters for parameters, gradients and optimizer states, each "
      "N (not sharded), I (sharded inside a group) or G (sharded over all ranks), e.g. IIG; or an alias: ddp, zero1, "
      "zero2, zero3, mics, hsdp",
      text));
}

std::vector<Strategy> allStrategies() {
  std::vector<Strategy> out;
  const Level levels[] = {Level::N, Level::I, Level::G};
  for (Level p : levels)
    for (Level g : levels)
      for (Level os : levels) out.push_back(Strategy{p, g, os});
  return out;
}

}  // namespace hoccl::paro
