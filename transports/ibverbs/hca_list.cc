// HOCCL_IB_HCA parsing and matching, and the default GID choice (see hca_list.h).
#include "transports/ibverbs/hca_list.h"

#include <cctype>

#include <fmt/format.h>

#include "base/error.h"

namespace hoccl::transport::ibverbs {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

[[noreturn]] void bad(const std::string& spec, const std::string& entry, const std::string& why) {
  throwInvalidArgument(
      fmt::format("HOCCL_IB_HCA='{}': entry '{}' {}. Expected comma-separated device[:port] "
                  "entries such as 'mlx5_0:1,mlx5_1', with a leading ^ to exclude and = for "
                  "exact names; `ibv_devinfo -l` lists the devices",
                  spec, entry, why));
}

bool nameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

}  // namespace

HcaFilter HcaFilter::parse(const std::string& spec) {
  HcaFilter f;
  std::string list = trim(spec);
  if (list.empty()) return f;
  bool allExclude = false, allExact = false;
  if (list[0] == '^') {
    allExclude = true;
    list.erase(0, 1);
  }
  if (!list.empty() && list[0] == '=') {
    allExact = true;
    list.erase(0, 1);
  }
  if (trim(list).empty()) bad(spec, spec, "has no device name");
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string raw = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::string item = trim(raw);
    if (item.empty()) bad(spec, raw, "is empty (two commas in a row, or a comma at an end)");
    HcaEntry e;
    e.exclude = allExclude;
    e.exact = allExact;
    size_t i = 0;
    if (item[i] == '^') {
      e.exclude = true;
      ++i;
    }
    if (i < item.size() && item[i] == '=') {
      e.exact = true;
      ++i;
    }
    std::string rest = item.substr(i);
    size_t colon = rest.find(':');
    e.name = rest.substr(0, colon);
    if (e.name.empty()) bad(spec, item, "has no device name");
    for (char c : e.name)
      if (!nameChar(c)) bad(spec, item, fmt::format("has the character '{}' in its device name", c));
    if (colon != std::string::npos) {
      std::string port = rest.substr(colon + 1);
      if (port.empty()) bad(spec, item, "has a ':' without a port number");
      if (port.size() > 3) bad(spec, item, "has a port number outside [1, 255]");
      int value = 0;
      for (char c : port) {
        if (!std::isdigit(static_cast<unsigned char>(c)))
          bad(spec, item, fmt::format("has a port '{}' that is not a number", port));
        value = value * 10 + (c - '0');
      }
      if (value < 1 || value > 255) bad(spec, item, "has a port number outside [1, 255]");
      e.port = value;
    }
    f.entries_.push_back(std::move(e));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return f;
}

bool HcaFilter::matches(const std::string& device, int port) const {
  bool anyInclude = false, included = false;
  for (const HcaEntry& e : entries_) {
    const bool nameHit = e.exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    const bool hit = nameHit && (e.port == 0 || e.port == port);
    if (e.exclude) {
      if (hit) return false;
    } else {
      anyInclude = true;
      included = included || hit;
    }
  }
  return !anyInclude || included;
}

bool gidIsZero(const std::array<uint8_t, 16>& gid) {
  for (uint8_t b : gid)
    if (b) return false;
  return true;
}

bool gidIsIpv4Mapped(const std::array<uint8_t, 16>& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid[i]) return false;
  return gid[10] == 0xff && gid[11] == 0xff;
}

int chooseGidIndex(const std::vector<GidEntry>& table) {
  int firstV2 = -1, firstAny = -1;
  for (const GidEntry& e : table) {
    if (gidIsZero(e.gid)) continue;
    if (firstAny < 0) firstAny = e.index;
    const bool v2 = e.type.find("v2") != std::string::npos;
    if (!v2) continue;
    if (gidIsIpv4Mapped(e.gid)) return e.index;
    if (firstV2 < 0) firstV2 = e.index;
  }
  return firstV2 >= 0 ? firstV2 : firstAny;
}

}  // namespace hoccl::transport::ibverbs
