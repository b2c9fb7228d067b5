// Link parameters per class (see link_model.h).
#include "topology/link_model.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "base/params.h"

namespace hoccl::topo {
namespace {

// The parameter's value scaled to seconds or bytes per second, else the model's built-in value. The declared range
// (base/param_list.h) keeps it positive.
double scaled(const params::IntParam& p, double fallback, double scale) {
  auto v = p.value();
  return v ? static_cast<double>(*v) * scale : fallback;
}

}  // namespace

const char* linkClassName(hocclLinkClass_t c) {
  switch (c) {
    case hocclLinkSelf: return "self";
    case hocclLinkIntraHost: return "intra-host";
    case hocclLinkIntraSwitch: return "intra-switch";
    case hocclLinkInterSwitch: return "inter-switch";
    default: return "unknown";
  }
}

LinkModel LinkModel::fromParams() {
  LinkModel m;
  if (auto file = params::MODEL_FILE.value()) {
    // Read once per path (every decision asks).
    static std::mutex mutex;
    static std::map<std::string, LinkModel> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = loaded.find(*file);
    if (it == loaded.end()) it = loaded.emplace(*file, load(*file)).first;
    m = it->second;
  }
  static const params::IntParam* const kBw[] = {&params::LINK_BW_SELF, &params::LINK_BW_INTRA_HOST,
                                                &params::LINK_BW_INTRA_SWITCH, &params::LINK_BW_INTER_SWITCH};
  static const params::IntParam* const kLat[] = {&params::LINK_LAT_SELF, &params::LINK_LAT_INTRA_HOST,
                                                 &params::LINK_LAT_INTRA_SWITCH, &params::LINK_LAT_INTER_SWITCH};
  static_assert(std::size(kBw) == hocclNumLinkClasses && std::size(kLat) == hocclNumLinkClasses);
  for (int c = 0; c < hocclNumLinkClasses; ++c) {
    m.beta[c] = scaled(*kBw[c], m.beta[c], 1e6);
    m.alpha[c] = scaled(*kLat[c], m.alpha[c], 1e-6);
  }
  if (!params::MODEL_FILE.isSet() || params::LINK_BW_INTRA_SWITCH.isSet()) m.nic = m.beta[hocclLinkIntraSwitch];
  if (!params::MODEL_FILE.isSet() || params::LINK_BW_INTER_SWITCH.isSet()) m.spine = m.beta[hocclLinkInterSwitch];
  return m;
}

LinkModel LinkModel::crowded(int ranksOnHost) const {
  LinkModel m = *this;
  const double f = crowding(ranksOnHost);
  m.shmHandoff = handoff() * f;
  m.shmCopy = kernelCopy() / f;
  m.shmMappedCopy = mappedCopy() / f;
  m.shmReduce = reduceRate() / f;
  m.cores = 0;
  m.cacheBytes = cacheBytes / f;
  if (f == 1.0) return m;
  for (int c : {static_cast<int>(hocclLinkSelf), static_cast<int>(hocclLinkIntraHost)}) {
    m.alpha[c] *= f;
    m.step[c] *= f;
    m.beta[c] /= f;
  }
  return m;
}

std::string LinkModel::describe() const {
  std::string out;
  for (int c = 0; c < hocclNumLinkClasses; ++c)
    out += fmt::format("{}{} {:.2f} GB/s {:.1f} us", c ? ", " : "", linkClassName(static_cast<hocclLinkClass_t>(c)),
                       beta[c] / 1e9, alpha[c] * 1e6) +
           (step[c] > 0 ? fmt::format(" + {:.1f} us/step", step[c] * 1e6) : std::string());
  return out + fmt::format(", NIC {:.2f} GB/s, spine uplink {:.3f} GB/s", nic / 1e9, spine / 1e9) +
         (spineBurst > 0 ? fmt::format(" with a {:.0f} kB burst", spineBurst / 1e3) : std::string()) +
         fmt::format(
             ", shm hand-off {:.2f} us, copy {:.2f} GB/s through the kernel and {:.2f} GB/s over "
             "mappings, reduce {:.2f} GB/s",
             handoff() * 1e6, kernelCopy() / 1e9, mappedCopy() / 1e9, reduceRate() / 1e9) +
         (cacheBytes > 0 ? fmt::format(", {:.0f} KiB of L2 per core and {:.0f} MiB of last-level cache ({:.2f}x on "
                                       "data a rank wrote the step before)",
                                       cacheBytes / 1024, llcBytes / (1024 * 1024), cacheGain)
                         : std::string()) +
         (cores > 0 ? fmt::format(", {} cores per host", cores) : std::string());
}

std::string LinkModel::toJson(const std::string& source) const {
  nlohmann::json j;
  for (int c = 0; c < hocclNumLinkClasses; ++c) {
    const char* name = linkClassName(static_cast<hocclLinkClass_t>(c));
    j["latency_us"][name] = alpha[c] * 1e6;
    j["bandwidth_GBps"][name] = beta[c] / 1e9;
    j["step_us"][name] = step[c] * 1e6;
  }
  j["nic_GBps"] = nic / 1e9;
  j["spine_GBps"] = spine / 1e9;
  j["spine_burst_bytes"] = spineBurst;
  j["shm"]["handoff_us"] = shmHandoff * 1e6;
  j["shm"]["copy_GBps"] = shmCopy / 1e9;
  j["shm"]["mapped_copy_GBps"] = shmMappedCopy / 1e9;
  j["shm"]["reduce_GBps"] = shmReduce / 1e9;
  j["cache"]["l2_bytes"] = cacheBytes;
  j["cache"]["llc_bytes"] = llcBytes;
  j["cache"]["gain"] = cacheGain;
  j["cores_per_host"] = cores;
  j["source"] = source;
  return j.dump(2) + "\n";
}

LinkModel LinkModel::fromJson(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throwInvalidArgument(fmt::format("cost model file {}: not JSON: {}", origin, e.what()));
  }
  if (!j.is_object()) throwInvalidArgument(fmt::format("cost model file {}: expected a JSON object", origin));
  auto positive = [&](const nlohmann::json& v, const std::string& what) {
    if (!v.is_number() || v.get<double>() <= 0)
      throwInvalidArgument(
          fmt::format("cost model file {}: {} must be a positive number, not {}", origin, what, v.dump()));
    return v.get<double>();
  };
  LinkModel m;
  bool nicSet = false, spineSet = false;
  auto nonNegative = [&](const nlohmann::json& v, const std::string& what) {
    if (!v.is_number() || v.get<double>() < 0)
      throwInvalidArgument(fmt::format("cost model file {}: {} must be a number >= 0, not {}", origin, what, v.dump()));
    return v.get<double>();
  };
  for (const char* group : {"latency_us", "bandwidth_GBps", "step_us"}) {
    if (!j.contains(group)) continue;
    if (!j[group].is_object())
      throwInvalidArgument(fmt::format("cost model file {}: {} must be an object", origin, group));
    for (const auto& [key, v] : j[group].items()) {
      int c = 0;
      while (c < hocclNumLinkClasses && key != linkClassName(static_cast<hocclLinkClass_t>(c))) ++c;
      if (c == hocclNumLinkClasses)
        throwInvalidArgument(
            fmt::format("cost model file {}: unknown link class '{}' in {} (valid: self, intra-host, "
                        "intra-switch, inter-switch)",
                        origin, key, group));
      const std::string what = fmt::format("{}.{}", group, key);
      if (group[0] == 'l') m.alpha[c] = positive(v, what) * 1e-6;
      else if (group[0] == 'b') m.beta[c] = positive(v, what) * 1e9;
      else m.step[c] = nonNegative(v, what) * 1e-6;
    }
  }
  if (j.contains("nic_GBps")) m.nic = positive(j["nic_GBps"], "nic_GBps") * 1e9, nicSet = true;
  if (j.contains("spine_GBps")) m.spine = positive(j["spine_GBps"], "spine_GBps") * 1e9, spineSet = true;
  if (j.contains("spine_burst_bytes")) m.spineBurst = nonNegative(j["spine_burst_bytes"], "spine_burst_bytes");
  if (j.contains("shm")) {
    const nlohmann::json& shm = j["shm"];
    if (!shm.is_object()) throwInvalidArgument(fmt::format("cost model file {}: shm must be an object", origin));
    for (const auto& [key, v] : shm.items()) {
      if (key == "handoff_us") m.shmHandoff = nonNegative(v, "shm.handoff_us") * 1e-6;
      else if (key == "copy_GBps") m.shmCopy = nonNegative(v, "shm.copy_GBps") * 1e9;
      else if (key == "mapped_copy_GBps") m.shmMappedCopy = nonNegative(v, "shm.mapped_copy_GBps") * 1e9;
      else if (key == "reduce_GBps") m.shmReduce = nonNegative(v, "shm.reduce_GBps") * 1e9;
      else
        throwInvalidArgument(
            fmt::format("cost model file {}: unknown key '{}' in shm (valid: handoff_us, copy_GBps, mapped_copy_GBps, "
                        "reduce_GBps; 0 derives them)",
                        origin, key));
    }
  }
  if (j.contains("cache")) {
    const nlohmann::json& cache = j["cache"];
    if (!cache.is_object()) throwInvalidArgument(fmt::format("cost model file {}: cache must be an object", origin));
    for (const auto& [key, v] : cache.items()) {
      if (key == "l2_bytes") m.cacheBytes = nonNegative(v, "cache.l2_bytes");
      else if (key == "llc_bytes") m.llcBytes = nonNegative(v, "cache.llc_bytes");
      else if (key == "gain") m.cacheGain = positive(v, "cache.gain");
      else
        throwInvalidArgument(fmt::format(
            "cost model file {}: unknown key '{}' in cache (valid: l2_bytes, llc_bytes, gain; sizes 0: unknown)",
            origin, key));
    }
  }
  if (j.contains("cores_per_host")) {
    const nlohmann::json& v = j["cores_per_host"];
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > (1 << 20))
      throwInvalidArgument(
          fmt::format("cost model file {}: cores_per_host must be a whole number >= 0 (0: unknown), not {}", origin,
                      v.dump()));
    m.cores = static_cast<int>(v.get<long long>());
  }
  if (!nicSet) m.nic = m.beta[hocclLinkIntraSwitch];
  if (!spineSet) m.spine = m.beta[hocclLinkInterSwitch];
  return m;
}

LinkModel LinkModel::load(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throwInvalidArgument(
        fmt::format("cannot read the cost model file '{}' (HOCCL_MODEL_FILE; write one with "
                    "hoccl-model calibrate)",
                    path));
  std::stringstream text;
  text << in.rdbuf();
  return fromJson(text.str(), path);
}

}  // namespace hoccl::topo
