// Link parameters per class (see link_model.h).
#include "topology/link_model.h"

#include <fmt/format.h>

#include "base/error.h"
#include "base/params.h"

namespace hoccl::topo {
namespace {

double positive(const char* name, double fallback, double scale) {
  auto v = params::get(name);
  if (!v) return fallback;
  int64_t x = params::getInt(name);
  if (x <= 0) throwInvalidArgument(fmt::format("HOCCL_{}={} must be a positive integer", name, *v));
  return static_cast<double>(x) * scale;
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
  static const char* kBw[] = {"LINK_BW_SELF", "LINK_BW_INTRA_HOST", "LINK_BW_INTRA_SWITCH", "LINK_BW_INTER_SWITCH"};
  static const char* kLat[] = {"LINK_LAT_SELF", "LINK_LAT_INTRA_HOST", "LINK_LAT_INTRA_SWITCH",
                               "LINK_LAT_INTER_SWITCH"};
  for (int c = 0; c < hocclNumLinkClasses; ++c) {
    m.beta[c] = positive(kBw[c], m.beta[c], 1e6);
    m.alpha[c] = positive(kLat[c], m.alpha[c], 1e-6);
  }
  m.nic = m.beta[hocclLinkIntraSwitch];
  m.spine = m.beta[hocclLinkInterSwitch];
  return m;
}

std::string LinkModel::describe() const {
  std::string out;
  for (int c = 0; c < hocclNumLinkClasses; ++c)
    out += fmt::format("{}{} {:.2f} GB/s {:.1f} us", c ? ", " : "", linkClassName(static_cast<hocclLinkClass_t>(c)),
                       beta[c] / 1e9, alpha[c] * 1e6);
  return out + fmt::format(", NIC {:.2f} GB/s, spine uplink {:.2f} GB/s", nic / 1e9, spine / 1e9);
}

}  // namespace hoccl::topo
