// The typed registry of environment knobs, read once.
//
// knobs.def declares every knob (name, NCCL alias, type, default, description). config() parses the
// environment the first time it is called and never again; later calls return the same values. A
// value that does not parse keeps the default and is recorded so that communicator creation fails
// with a message naming the variable, the value and what was expected (configStatus()).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace ferry {

/// A Seconds knob set to "none": no deadline. Every user of FERRY_TIMEOUT handles it (Deadline::after
/// never expires for it; GPU waits take timeoutNs 0).
inline constexpr double kNoTimeout = std::numeric_limits<double>::infinity();
/// Shortest Seconds value: waits poll and the rendezvous wire count whole milliseconds.
inline constexpr double kMinTimeoutSeconds = 0.001;
/// Longest Seconds value (11.6 days): fits poll()'s int milliseconds (24.8 days), the rendezvous wire's
/// u32 milliseconds (49.7 days) and the GPU's u64 nanoseconds; longer waits are asked for with "none".
inline constexpr double kMaxTimeoutSeconds = 1e6;

/// Parsed values of every knob in knobs.def.
struct Config {
#define FERRY_KNOB_TYPE_Int int64_t
#define FERRY_KNOB_TYPE_Seconds double
#define FERRY_KNOB_TYPE_Bool bool
#define FERRY_KNOB_TYPE_String std::string
#define FERRY_KNOB(field, kind, name, alias, def, desc) FERRY_KNOB_TYPE_##kind field = def;
#include "knobs.def"
};

/// The two constants a knob's automatic value reads (a FERRY_AUTO row of knobs.def).
struct AutoConstants {
  int64_t a;
  int64_t b;
};

/// Each automatic knob's constants, named after its Config field: knob_auto::spinNs.a.
namespace knob_auto {
#define FERRY_AUTO(field, resolver, a, b, rule) inline constexpr AutoConstants field{a, b};
#include "knobs.def"
}  // namespace knob_auto

/// Description of one knob and the value in force, for `ferry-config` and the INIT log.
struct KnobInfo {
  std::string field;  ///< its member of Config
  std::string name;
  std::string alias;  ///< NCCL_* alias, empty when none
  std::string kind;   ///< "int", "seconds", "bool" or "string"
  std::string defaultValue;
  std::string value;   ///< value in force, rendered as text
  std::string source;  ///< "default", or the variable it came from
  std::string description;
  /// What the default -1 resolves to, with its constants (FERRY_AUTO); empty for other knobs.
  std::string autoRule;
  std::string resolver;  ///< the function that resolves -1, with autoRule
};

/// An environment lookup: returns nullptr when the variable is unset.
using EnvLookup = std::function<const char*(const char*)>;

/// The process environment (the only place ferry calls getenv).
const char* readEnv(const char* name);

/// Parse every knob through `lookup`. Errors (unparsable values) are appended to `errors`.
Config parseConfig(const EnvLookup& lookup, std::vector<std::string>* errors, std::vector<KnobInfo>* infos);

/// The process-wide configuration, parsed from the environment on first use.
const Config& config();
/// Ok, or an InvalidArgument naming every knob whose value did not parse.
Status configStatus();
/// Every knob with its description and the value in force.
const std::vector<KnobInfo>& knobInfos();

}  // namespace ferry
