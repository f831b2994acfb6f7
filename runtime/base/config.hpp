// The typed registry of environment knobs, read once.
//
// knobs.def declares every knob (name, NCCL alias, type, default, description). config() parses the
// environment the first time it is called and never again; later calls return the same values. A
// value that does not parse keeps the default and is recorded so that communicator creation fails
// with a message naming the variable, the value and what was expected (configStatus()).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace ferry {

/// Parsed values of every knob in knobs.def.
struct Config {
#define FERRY_KNOB_TYPE_Int int64_t
#define FERRY_KNOB_TYPE_Double double
#define FERRY_KNOB_TYPE_Bool bool
#define FERRY_KNOB_TYPE_String std::string
#define FERRY_KNOB(field, kind, name, alias, def, desc) FERRY_KNOB_TYPE_##kind field = def;
#include "knobs.def"
#undef FERRY_KNOB
};

/// Description of one knob and the value in force, for `ferry-config` and the INIT log.
struct KnobInfo {
  std::string name;
  std::string alias;  ///< NCCL_* alias, empty when none
  std::string kind;   ///< "int", "double", "bool" or "string"
  std::string defaultValue;
  std::string value;   ///< value in force, rendered as text
  std::string source;  ///< "default", or the variable it came from
  std::string description;
};

/// An environment lookup: returns nullptr when the variable is unset.
using EnvLookup = std::function<const char*(const char*)>;

/// The process environment (the only place ferry calls getenv).
const char* readEnv(const char* name);

/// Parse every knob through `lookup`. Errors (unparsable values) are appended to `errors`.
Config parseConfig(const EnvLookup& lookup, std::vector<std::string>* errors,
                   std::vector<KnobInfo>* infos);

/// The process-wide configuration, parsed from the environment on first use.
const Config& config();
/// Ok, or an InvalidArgument naming every knob whose value did not parse.
Status configStatus();
/// Every knob with its description and the value in force.
const std::vector<KnobInfo>& knobInfos();

}  // namespace ferry
