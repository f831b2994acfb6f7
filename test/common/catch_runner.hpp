// The hook of test/common/catch_main.cpp: a test binary with setup of its own defines testMain.
#pragma once

/// Runs Catch2 on `argc`/`argv` (argv[0] is the program) and returns its exit status.
using RunCatch = int (*)(int argc, char** argv);

/// Defined by a test binary that must act before Catch2 runs: called by main() with the command
/// line; returns the exit status (77 to have meson report the test as skipped).
int testMain(int argc, char** argv, RunCatch runCatch);
