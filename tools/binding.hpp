// Which core each rank of a launch runs on (ferryrun --bind-to).
//
// Left alone, the scheduler may put two ranks that hand data back and forth on one core while the
// other idles, and a small call then takes ten times as long (evidence: docs/PERFORMANCE.md,
// "Binding ranks to cores"). So ferryrun, like mpirun (which binds to cores by default for up to
// two ranks), binds each rank to a core of its own when there are enough: rank r to the r-th core
// of the launcher's allowed CPUs, distinct physical cores first (one hardware thread of each), then
// their sibling threads. With more ranks than allowed CPUs nothing is bound (pinning several busy
// ranks to one CPU only hides the oversubscription).
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace ferry::tools {

/// --bind-to: "core" binds as above, "none" never, "auto" (the default) binds when every rank
/// gets a CPU of its own.
enum class BindPolicy { kAuto, kCore, kNone };

/// Parses "auto", "core" or "none"; false for anything else.
bool parseBindPolicy(const std::string& text, BindPolicy* out);

/// The CPUs in `allowed`, ordered so that each physical core (package and core id from sysfs)
/// comes once before any core's second hardware thread. CPUs whose topology cannot be read count
/// as cores of their own.
std::vector<int> cpusByCore(const cpu_set_t& allowed);

/// The CPU each of `ranks` ranks is bound to under `policy`, or an empty list for no binding.
/// `cpus` as cpusByCore() returns it. kCore with more ranks than CPUs binds round-robin.
std::vector<int> bindingFor(BindPolicy policy, int ranks, const std::vector<int>& cpus);

}  // namespace ferry::tools
