// Catch2 main for the benchmark's unit tests, alone in its translation unit so the tests rebuild
// fast. (GCC 12 -O2 reports a false -Wmaybe-uninitialized inside Catch2's main; see test/kernels.)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
