// Catch2 main for the kernel tests, alone in its translation unit so the test files rebuild fast.
//
// GCC 12 with -O2 and the sanitizers reports a false -Wmaybe-uninitialized inside libstdc++'s
// std::function as instantiated by Catch2's main (std::regex); with -Werror that would fail the
// sanitizer builds, so the warning is off for this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
