/// @file hash.h
/// The one FNV-1a hash of hoccl (64-bit): stable across processes, hosts and builds, so ranks can compare hashes of
/// names (host ids, switch ids, job tags) without exchanging the names. Not for secrets: it is fast, not strong
/// (base/boot finishes its token hash with a mixer for that reason).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hoccl {

/// FNV-1a's 64-bit offset basis: the hash of no bytes.
inline constexpr uint64_t kFnv1aBasis = 14695981039346656037ull;  // 0xcbf29ce484222325
/// FNV-1a's 64-bit prime.
inline constexpr uint64_t kFnv1aPrime = 1099511628211ull;  // 0x100000001b3

/// One FNV-1a round: folds `byte` into the running hash `h`. For callers that hash a stream byte by byte.
constexpr uint64_t fnv1aStep(uint64_t h, unsigned char byte) { return (h ^ byte) * kFnv1aPrime; }

/// FNV-1a of `bytes` bytes at `data`, continuing from `h` (kFnv1aBasis to start a fresh hash).
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnv1aBasis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = fnv1aStep(h, p[i]);
  return h;
}

/// FNV-1a of the characters of `text`, continuing from `h` (kFnv1aBasis to start a fresh hash).
constexpr uint64_t fnv1a(std::string_view text, uint64_t h = kFnv1aBasis) {
  for (char c : text) h = fnv1aStep(h, static_cast<unsigned char>(c));
  return h;
}

// The published test vectors of 64-bit FNV-1a.
static_assert(fnv1a(std::string_view("")) == 0xcbf29ce484222325ull, "FNV-1a of nothing is the offset basis");
static_assert(fnv1a(std::string_view("a")) == 0xaf63dc4c8601ec8cull, "FNV-1a test vector \"a\"");
static_assert(fnv1a(std::string_view("foobar")) == 0x85944171f73967e8ull, "FNV-1a test vector \"foobar\"");

}  // namespace hoccl
