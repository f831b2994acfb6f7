// Catch2's implementation and main(), compiled once for every test binary (catch2_main_dep in
// test/meson.build) instead of once per test. A binary that must act before Catch2 runs (options of
// its own, skip without a GPU) defines testMain() (catch_runner.hpp); main() then hands over to it.
//
// GCC 12 with -O2 and the sanitizers reports a false -Wmaybe-uninitialized inside libstdc++'s
// std::function as instantiated by Catch2's main (std::regex); with -Werror that would fail the
// sanitizer builds, so the warning is off for this file only (clang has no such warning).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "test/common/catch_runner.hpp"

// Weak: resolved to the test's own testMain when it defines one, null otherwise.
int testMain(int argc, char** argv, RunCatch runCatch) __attribute__((weak));

int main(int argc, char** argv) {
  RunCatch run = [](int n, char** args) { return Catch::Session().run(n, args); };
  return testMain != nullptr ? testMain(argc, argv, run) : run(argc, argv);
}
