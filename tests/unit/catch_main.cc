// The Catch2 main, in its own object because it takes seconds to compile.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
