// Link parameters per class (see link_model.h).
#include "topology/link_model.h"

#include <fmt/format.h>

#include <iterator>

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
  static const params::IntParam* const kBw[] = {&params::LINK_BW_SELF, &params::LINK_BW_INTRA_HOST,
                                                &params::LINK_BW_INTRA_SWITCH, &params::LINK_BW_INTER_SWITCH};
  static const params::IntParam* const kLat[] = {&params::LINK_LAT_SELF, &params::LINK_LAT_INTRA_HOST,
                                                 &params::LINK_LAT_INTRA_SWITCH, &params::LINK_LAT_INTER_SWITCH};
  static_assert(std::size(kBw) == hocclNumLinkClasses && std::size(kLat) == hocclNumLinkClasses);
  for (int c = 0; c < hocclNumLinkClasses; ++c) {
    m.beta[c] = scaled(*kBw[c], m.beta[c], 1e6);
    m.alpha[c] = scaled(*kLat[c], m.alpha[c], 1e-6);
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
