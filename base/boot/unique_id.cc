// Encoding of hocclUniqueId and the two ways to make one: GetUniqueId (random secret, fresh listener) and the
// launcher environment (HOCCL_COMM_ID + HOCCL_AUTH_TOKEN, rank 0 serves the root).
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <random>

#include "base/boot/bootstrap.h"
#include "base/boot/root_server.h"
#include "base/error.h"
#include "base/log.h"
#include "base/params.h"

namespace hoccl::boot {
namespace {

struct IdWire {
  uint32_t magic;
  uint32_t version;
  uint64_t nonce;
  uint8_t secret[16];
  uint32_t addrLength;
  uint8_t addr[sizeof(sockaddr_in6)];
};
static_assert(sizeof(IdWire) <= HOCCL_UNIQUE_ID_BYTES, "unique id layout too large");

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// SHA-256("hoccl job secret" | token): its first 16 bytes are the job secret, the next 8 the communicator tag (so
// the tag, which travels in the clear, says nothing about the secret). The handshake (handshake.h) never sends the
// secret; a token should still be random (hoccl-run draws 128 bits), since a guessable one can be tried offline
// against a recorded handshake.
std::array<unsigned char, 32> tokenDigest(const std::string& token) {
  const std::string input = "hoccl job secret\n" + token;
  std::array<unsigned char, 32> digest{};
  unsigned int len = 0;
  if (EVP_Digest(input.data(), input.size(), digest.data(), &len, EVP_sha256(), nullptr) != 1 || len != 32)
    throwInternalError("could not hash HOCCL_AUTH_TOKEN (OpenSSL EVP_Digest failed)");
  return digest;
}

}  // namespace

hocclUniqueId encode(const UniqueId& id) {
  hocclUniqueId out{};
  IdWire w{};
  w.magic = id.magic;
  w.version = id.version;
  w.nonce = id.nonce;
  std::memcpy(w.secret, id.secret.data(), 16);
  w.addrLength = id.root.length;
  std::memcpy(w.addr, &id.root.storage, std::min<size_t>(id.root.length, sizeof(w.addr)));
  std::memcpy(out.internal, &w, sizeof(w));
  return out;
}

UniqueId decode(const hocclUniqueId& raw) {
  IdWire w{};
  std::memcpy(&w, raw.internal, sizeof(w));
  if (w.magic != kUniqueIdMagic)
    throwInvalidArgument(
        "the unique id is not a hoccl id (bad magic): pass every rank the bytes that "
        "hocclGetUniqueId produced on the root, unchanged");
  if (w.version != HOCCL_VERSION_CODE)
    throwInvalidArgument(
        fmt::format("the unique id comes from hoccl version {} but this is {}: run the same "
                    "version on every rank",
                    w.version, HOCCL_VERSION_CODE));
  if (w.addrLength == 0 || w.addrLength > sizeof(w.addr)) throwInvalidArgument("the unique id has no root address");
  UniqueId id;
  id.magic = w.magic;
  id.version = w.version;
  id.nonce = w.nonce;
  std::memcpy(id.secret.data(), w.secret, 16);
  id.root.length = w.addrLength;
  std::memcpy(&id.root.storage, w.addr, w.addrLength);
  return id;
}

UniqueId createUniqueId() {
  UniqueId id;
  id.magic = kUniqueIdMagic;
  id.version = HOCCL_VERSION_CODE;
  id.secret = net::randomSecret();
  net::Secret nonceBytes = net::randomSecret();
  std::memcpy(&id.nonce, nonceBytes.data(), sizeof(id.nonce));
  net::Fd listener = net::listenOn(net::localAddress(), &id.root);
  HOCCL_INFO(kBootstrap, "bootstrap root listening on {}", id.root.toString());
  startRootServer(std::move(listener), id);
  return id;
}

UniqueId uniqueIdFromEnvironment(int rank) {
  auto commId = params::COMM_ID.value();
  if (!commId)
    throwInvalidUsage(
        "launcher-style init needs HOCCL_COMM_ID=host:port (the address rank 0 listens on) and "
        "HOCCL_AUTH_TOKEN; start the job with hoccl-run, or set them for every rank");
  auto token = params::AUTH_TOKEN.value();
  if (!token)
    throwInvalidUsage(
        "HOCCL_COMM_ID is set but HOCCL_AUTH_TOKEN is not: every rank needs the same secret token "
        "(for example from `openssl rand -hex 16`); hoccl-run sets one for you");
  return uniqueIdFor(*commId, *token, rank, "HOCCL_COMM_ID");
}

UniqueId uniqueIdFor(const std::string& commId, const std::string& token, int rank, const std::string& origin) {
  UniqueId id;
  id.magic = kUniqueIdMagic;
  id.version = HOCCL_VERSION_CODE;
  id.root = net::Address::parse(commId);
  const auto digest = tokenDigest(token);
  std::memcpy(id.secret.data(), digest.data(), id.secret.size());
  uint64_t tag = 0;
  std::memcpy(&tag, digest.data() + 16, sizeof(tag));
  id.nonce = mix(tag ^ static_cast<uint64_t>(id.root.port()));
  if (rank == 0) {
    net::Address bound;
    net::Fd listener = net::listenOn(id.root, &bound);
    HOCCL_INFO(kBootstrap, "rank 0 serves the bootstrap root on {} ({})", bound.toString(), origin);
    startRootServer(std::move(listener), id);
  }
  return id;
}

}  // namespace hoccl::boot
