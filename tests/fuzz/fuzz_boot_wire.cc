/*
 * libFuzzer target: the bytes a bootstrap connection delivers (base/boot/wire.h).
 *
 * The first input byte picks what the rest is:
 *   0  a stream from a rank to the root: split into messages with nextRankMessage exactly as the root's readFrom
 *      does; every failure or mismatch report's text goes through namedRanks (how the root finds the suspects);
 *   1  a stream from the root to a rank: split with nextRootMessage as the rank's watcher does; a verdict's
 *      payload is read as the watcher reads it;
 *   2  a hocclUniqueId (128 bytes, as a user or a launcher hands it over): boot::decode.
 * Each mode also checks the framing's promise: a Whole message never reaches beyond the bytes that arrived.
 * The target knows only these functions' interfaces, so a change of the wire format changes little here.
 */
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/boot/bootstrap.h"
#include "base/boot/wire.h"
#include "base/error.h"

using namespace hoccl::boot;

namespace {

// Splits `data` as a connection's input; calls onMessage(type, payload, bytes) for every whole message.
template <class Header, class Next, class OnMessage>
void split(const char* data, size_t size, Next next, OnMessage onMessage) {
  size_t used = 0;
  while (true) {
    const Frame f = next(data + used, size - used);
    if (f.status != Frame::Whole) return;
    if (sizeof(Header) + f.bytes > size - used) std::abort();  // a whole message beyond what arrived
    onMessage(f.type, data + used + sizeof(Header), static_cast<size_t>(f.bytes));
    used += sizeof(Header) + f.bytes;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const char* data = reinterpret_cast<const char*>(bytes) + 1;
  const size_t n = size - 1;
  switch (bytes[0] % 3) {
    case 0:
      split<RankHeader>(data, n, nextRankMessage, [](uint32_t type, const char* body, size_t len) {
        if (type != kRankReport && type != kRankMismatch) return;
        for (int r : namedRanks(std::string(body, len)))
          if (r < 0) std::abort();  // namedRanks reads digits only
      });
      break;
    case 1:
      split<RootHeader>(data, n, nextRootMessage, [](uint32_t type, const char* body, size_t len) {
        if (type != kRootVerdict || len < sizeof(VerdictWire)) return;
        VerdictWire w;
        std::memcpy(&w, body, sizeof(w));
        std::string text(body + sizeof(w), len - sizeof(w));
        (void)text;
      });
      break;
    default: {
      hocclUniqueId raw{};
      std::memcpy(raw.internal, data, std::min(n, sizeof(raw.internal)));
      try {
        const UniqueId id = decode(raw);
        if (id.root.length == 0 || id.root.length > sizeof(id.root.storage)) std::abort();
        (void)id.root.toString();
      } catch (const hoccl::Error&) {
        // a clear refusal is the expected answer to most inputs
      }
      break;
    }
  }
  return 0;
}
