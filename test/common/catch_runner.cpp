// Catch2's implementation and a main() for the test binaries that must act before Catch2 runs
// (parse options of their own, skip without a GPU): they define testMain() instead of main()
// and call `runCatch` with the arguments Catch2 should see. Compiled once (catch2_runner_dep).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // see catch_main.cpp
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "test/common/catch_runner.hpp"

int main(int argc, char** argv) {
  return testMain(argc, argv, [](int n, char** args) { return Catch::Session().run(n, args); });
}
