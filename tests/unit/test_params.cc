// Typed parameters (base/param_list.h, base/params.h): defaults, set values, malformed and out-of-range values and
// their messages, NCCL_ names, the declarations themselves, and the launcher's rank variables.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "error_of.h"
#include "scoped_env.h"
#include "base/error.h"
#include "base/params.h"
#include "comm/launcher_env.h"

using namespace hoccl;
using hoccl::test::errorOf;
using hoccl::test::ScopedEnv;

TEST_CASE("an unset parameter reads as its declared default", "[params]") {
  ScopedEnv t("HOCCL_TIMEOUT", nullptr), a("HOCCL_ALGO", nullptr);
  ScopedEnv s("HOCCL_DEBUG_SUBSYS", ""), c("HOCCL_TCP_CONNS", "");
  CHECK_FALSE(params::TIMEOUT.isSet());
  CHECK_FALSE(params::TIMEOUT.value().has_value());
  CHECK(params::TIMEOUT.get() == 300);
  CHECK(params::TIMEOUT.get() == *params::TIMEOUT.defaultValue());
  CHECK_FALSE(params::ALGO.isSet());
  CHECK(params::ALGO.get().empty());
  // An empty variable counts as unset.
  CHECK_FALSE(params::DEBUG_SUBSYS.isSet());
  CHECK(params::DEBUG_SUBSYS.get() == params::DEBUG_SUBSYS.defaultValue());
  CHECK(params::TCP_CONNS.get() == 2);
}

TEST_CASE("a set parameter reads as its value", "[params]") {
  {
    ScopedEnv t("HOCCL_TIMEOUT", "42");
    CHECK(params::TIMEOUT.isSet());
    CHECK(params::TIMEOUT.value() == 42);
    CHECK(params::TIMEOUT.get() == 42);
  }
  {
    ScopedEnv t("HOCCL_TIMEOUT", "0x10");
    CHECK(params::TIMEOUT.get() == 16);
  }
  {
    ScopedEnv t("HOCCL_TIMEOUT", "010");  // decimal, not octal
    CHECK(params::TIMEOUT.get() == 10);
  }
  {
    ScopedEnv t("HOCCL_TIMEOUT", "+7");
    CHECK(params::TIMEOUT.get() == 7);
  }
  {
    ScopedEnv b("HOCCL_SHM_SLOTS", "2"), c("HOCCL_SHM_SLOT_SIZE", "1073741824");  // both ends of their ranges
    CHECK(params::SHM_SLOTS.get() == 2);
    CHECK(params::SHM_SLOT_SIZE.get() == int64_t{1} << 30);
  }
  {
    ScopedEnv a("HOCCL_ALGO", "ring");
    CHECK(params::ALGO.isSet());
    CHECK(params::ALGO.value() == std::string("ring"));
    CHECK(params::ALGO.get() == "ring");
  }
}

TEST_CASE("a malformed integer is an InvalidArgument naming the variable, the value and the range", "[params]") {
  for (const char* bad : {"abc", "12s", " 5", "5 ", "1.5", "0x", "-", "0xZZ", "99999999999999999999999"}) {
    ScopedEnv t("HOCCL_TIMEOUT", bad);
    INFO("HOCCL_TIMEOUT='" << bad << "'");
    std::string msg = errorOf([] { params::TIMEOUT.get(); }, hocclInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("HOCCL_TIMEOUT='" + std::string(bad) + "'"));
    CHECK_THAT(msg, Catch::Contains("[1, 31536000]"));
    CHECK_THAT(msg, Catch::Contains("default, 300"));
    CHECK_THROWS_AS(params::TIMEOUT.value(), Error);
    CHECK(params::TIMEOUT.isSet());  // set, just not valid
  }
}

TEST_CASE("an integer outside its declared range is an InvalidArgument naming the range", "[params]") {
  {
    ScopedEnv t("HOCCL_TIMEOUT", "0");
    std::string msg = errorOf([] { params::TIMEOUT.get(); }, hocclInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("HOCCL_TIMEOUT='0'") && Catch::Contains("expected an integer in [1, 31536000]"));
  }
  for (const char* bad : {"1", "65", "-8"}) {
    ScopedEnv s("HOCCL_SHM_SLOTS", bad);
    std::string msg = errorOf([] { params::SHM_SLOTS.get(); }, hocclInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("HOCCL_SHM_SLOTS='" + std::string(bad) + "'") && Catch::Contains("[2, 64]"));
  }
  {
    ScopedEnv s("HOCCL_SHM_DISABLE", "yes");
    std::string msg = errorOf([] { params::SHM_DISABLE.get(); }, hocclInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("HOCCL_SHM_DISABLE='yes'") && Catch::Contains("[0, 1]"));
  }
  {
    ScopedEnv s("HOCCL_TOPO_PROBE", "2");
    CHECK_THROWS_WITH(params::TOPO_PROBE.get(), Catch::Contains("[0, 1]"));
  }
}

TEST_CASE("a parameter without default: value() says unset, get() is an internal error", "[params]") {
  ScopedEnv r("HOCCL_RANK", nullptr);
  REQUIRE_FALSE(params::RANK.defaultValue().has_value());
  CHECK_FALSE(params::RANK.value().has_value());
  std::string msg = errorOf([] { params::RANK.get(); }, hocclInternalError);
  CHECK_THAT(msg, Catch::Contains("HOCCL_RANK") && Catch::Contains("value()"));
  ScopedEnv set("HOCCL_RANK", "3");
  CHECK(params::RANK.get() == 3);
}

TEST_CASE("NCCL_ names count only after enableNcclNames, and HOCCL_ names win", "[params][nccl]") {
  // The only test of this executable that enables NCCL names (it cannot be turned off again).
  ScopedEnv h1("HOCCL_SWITCH_ID", nullptr), n1("NCCL_SWITCH_ID", "from-nccl");
  ScopedEnv h2("HOCCL_TCP_CONNS", nullptr), n2("NCCL_TCP_CONNS", "5");
  CHECK_FALSE(params::SWITCH_ID.isSet());
  CHECK(params::TCP_CONNS.get() == 2);

  params::enableNcclNames();
  CHECK(params::SWITCH_ID.value() == std::string("from-nccl"));
  CHECK(params::TCP_CONNS.get() == 5);
  {
    ScopedEnv w1("HOCCL_SWITCH_ID", "from-hoccl"), w2("HOCCL_TCP_CONNS", "3");
    CHECK(params::SWITCH_ID.get() == "from-hoccl");
    CHECK(params::TCP_CONNS.get() == 3);
  }
  {
    // The error names the variable the value came from.
    ScopedEnv bad("NCCL_TCP_CONNS", "17");
    std::string msg = errorOf([] { params::TCP_CONNS.get(); }, hocclInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("NCCL_TCP_CONNS='17'") && Catch::Contains("[1, 16]"));
  }
}

TEST_CASE("every parameter is declared once, with a doc, a consistent range and a default inside it", "[params]") {
  const auto& all = params::all();
  REQUIRE(all.size() > 20);
  std::set<std::string> names;
  for (const auto& p : all) {
    INFO("HOCCL_" << p.name);
    CHECK(names.insert(p.name).second);
    REQUIRE(p.doc != nullptr);
    CHECK(std::string(p.doc).size() > 10);
    CHECK(std::string(p.doc).find('\n') == std::string::npos);
    CHECK((p.integer != nullptr) == (p.type == params::Type::Int));
    CHECK((p.text != nullptr) == (p.type == params::Type::String));
    if (p.integer) {
      CHECK(std::string(p.integer->name()) == p.name);
      CHECK(p.integer->wellFormed());
      if (p.integer->defaultValue()) CHECK(p.defaultText == std::to_string(*p.integer->defaultValue()));
      else CHECK(p.defaultText.empty());
    } else {
      CHECK(std::string(p.text->name()) == p.name);
      CHECK(p.defaultText == p.text->defaultValue());
    }
  }
  CHECK(names.count("TIMEOUT") == 1);
  CHECK(names.count("ALGO") == 1);
  CHECK(std::string(params::typeName(params::Type::Int)) == "int");
  CHECK(std::string(params::typeName(params::Type::String)) == "string");
}

TEST_CASE("launcher rank and size: HOCCL_ first, then other launchers, all range-checked", "[params][launcher]") {
  ScopedEnv r("HOCCL_RANK", nullptr), w("HOCCL_WORLD_SIZE", nullptr), o1("OMPI_COMM_WORLD_RANK", nullptr),
      o2("OMPI_COMM_WORLD_SIZE", nullptr), p1("PMI_RANK", nullptr), p2("PMI_SIZE", nullptr),
      s1("SLURM_PROCID", nullptr), s2("SLURM_NTASKS", nullptr);
  CHECK_FALSE(launcherRank().has_value());
  {
    ScopedEnv a("PMI_RANK", "1"), b("PMI_SIZE", "4");
    auto lr = launcherRank();
    REQUIRE(lr.has_value());
    CHECK(lr->rank == 1);
    CHECK(lr->size == 4);
    CHECK(lr->source == "MPICH/Hydra");
    ScopedEnv c("HOCCL_RANK", "2"), d("HOCCL_WORLD_SIZE", "3");
    lr = launcherRank();
    REQUIRE(lr.has_value());
    CHECK(lr->rank == 2);
    CHECK(lr->source == "hoccl-run");
  }
  {
    ScopedEnv a("HOCCL_RANK", "3"), b("HOCCL_WORLD_SIZE", "3");
    CHECK_THROWS_WITH(launcherRank(), Catch::Contains("HOCCL_RANK=3 is not below HOCCL_WORLD_SIZE=3"));
  }
  {
    ScopedEnv a("HOCCL_RANK", "0"), b("HOCCL_WORLD_SIZE", "0");
    CHECK_THROWS_WITH(launcherRank(), Catch::Contains("HOCCL_WORLD_SIZE='0'"));
  }
  {
    ScopedEnv a("SLURM_PROCID", "x"), b("SLURM_NTASKS", "2");
    CHECK_THROWS_WITH(launcherRank(), Catch::Contains("SLURM_PROCID='x'") && Catch::Contains("[0, 16777215]"));
  }
}
