// Catch2's implementation and main(), compiled once for every test binary that uses Catch2's
// default main (catch2_main_dep in test/meson.build) instead of once per test: ~40 s of g++ each.
// Tests with a main() of their own define CATCH_CONFIG_RUNNER themselves.
//
// GCC 12 with -O2 and the sanitizers reports a false -Wmaybe-uninitialized inside libstdc++'s
// std::function as instantiated by Catch2's main (std::regex); with -Werror that would fail the
// sanitizer builds, so the warning is off for this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
