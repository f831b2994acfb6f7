// Facts about this process and host that the report prints: host name, processor model, and
// resident memory (current and peak) for -M.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::perf {

/// gethostname(), without the domain.
std::string hostName();
/// "cpu <model name>" from /proc/cpuinfo, or just "cpu".
std::string cpuDescription();
/// Resident set size of this process in bytes (VmRSS), 0 if unknown.
int64_t residentBytes();
/// Peak resident set size (VmHWM) in bytes, 0 if unknown.
int64_t peakResidentBytes();

}  // namespace ferry::perf
