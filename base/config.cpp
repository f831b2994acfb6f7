#include "config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>

namespace ferry {
namespace {

bool parseValue(const char* text, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = v;
  return true;
}

// Seconds: a finite number in [kMinTimeoutSeconds, kMaxTimeoutSeconds], or "none" for no deadline.
// Anything else (0, negatives, nan, inf, an underflow) is refused rather than read as "never".
bool parseValue(const char* text, double* out) {
  if (strcasecmp(text, "none") == 0) return (*out = kNoTimeout, true);
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(v)) return false;
  if (v < kMinTimeoutSeconds || v > kMaxTimeoutSeconds) return false;
  *out = v;
  return true;
}

bool parseValue(const char* text, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on", "y"};
  static const char* const kFalse[] = {"0", "false", "no", "off", "n"};
  for (const char* t : kTrue) {
    if (strcasecmp(text, t) == 0) return (*out = true, true);
  }
  for (const char* f : kFalse) {
    if (strcasecmp(text, f) == 0) return (*out = false, true);
  }
  return false;
}

bool parseValue(const char* text, std::string* out) {
  *out = text;
  return true;
}

std::string render(int64_t v) { return std::to_string(v); }
std::string render(double v) {
  if (v == kNoTimeout) return "none";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}
std::string render(bool v) { return v ? "1" : "0"; }
std::string render(const std::string& v) { return v; }

const char* kindName(int64_t*) { return "int"; }
const char* kindName(double*) { return "seconds"; }
const char* kindName(bool*) { return "bool"; }
const char* kindName(std::string*) { return "string"; }

std::string expectation(int64_t*) { return "an integer"; }
std::string expectation(double*) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "a number of seconds from %g to %g, or 'none' for no deadline", kMinTimeoutSeconds,
                kMaxTimeoutSeconds);
  return buf;
}
std::string expectation(bool*) { return "one of 1/0, true/false, yes/no, on/off"; }
std::string expectation(std::string*) { return "a string"; }

// Reads one knob: the FERRY_ name wins over the NCCL_ alias.
template <typename T>
void readKnob(const EnvLookup& lookup, const char* member, const char* name, const char* alias, const char* desc,
              T* field, std::vector<std::string>* errors, std::vector<KnobInfo>* infos) {
  KnobInfo info;
  info.field = member;
  info.name = name;
  info.alias = alias;
  info.kind = kindName(field);
  info.defaultValue = render(*field);
  info.description = desc;
  info.source = "default";
  const char* used = nullptr;
  const char* text = lookup(name);
  if (text != nullptr) {
    used = name;
  } else if (alias[0] != '\0' && (text = lookup(alias)) != nullptr) {
    used = alias;
  }
  if (text != nullptr) {
    T parsed{};
    if (parseValue(text, &parsed)) {
      *field = parsed;
      info.source = used;
    } else if (errors != nullptr) {
      errors->push_back(std::string(used) + "='" + text + "' is not valid: expected " + expectation(field) + " (" +
                        desc + ")");
    }
  }
  info.value = render(*field);
  if (infos != nullptr) infos->push_back(std::move(info));
}

struct Loaded {
  Config config;
  std::vector<std::string> errors;
  std::vector<KnobInfo> infos;
};

// The FERRY_AUTO row of `field`: its rule with {a} and {b} replaced by the constants.
void describeAuto(std::vector<KnobInfo>& infos, const char* field, const char* resolver, AutoConstants c,
                  std::string rule) {
  for (const auto& [mark, value] : {std::pair{"{a}", c.a}, std::pair{"{b}", c.b}}) {
    for (size_t at = rule.find(mark); at != std::string::npos; at = rule.find(mark, at)) {
      rule.replace(at, 3, std::to_string(value));
    }
  }
  for (KnobInfo& k : infos) {
    if (k.field != field) continue;
    k.autoRule = rule;
    k.resolver = resolver;
  }
}

const Loaded& loaded() {
  static const Loaded* value = [] {
    auto* l = new Loaded;  // never freed: logging may use it during static destruction
    l->config = parseConfig(readEnv, &l->errors, &l->infos);
    return l;
  }();
  return *value;
}

}  // namespace

const char* readEnv(const char* name) { return std::getenv(name); }

Config parseConfig(const EnvLookup& lookup, std::vector<std::string>* errors, std::vector<KnobInfo>* infos) {
  Config c;
#define FERRY_KNOB(field, kind, name, alias, def, desc) \
  readKnob(lookup, #field, name, alias, desc, &c.field, errors, infos);
#include "knobs.def"
  if (infos != nullptr) {
#define FERRY_AUTO(field, resolver, a, b, rule) describeAuto(*infos, #field, #resolver, knob_auto::field, rule);
#include "knobs.def"
  }
  return c;
}

const Config& config() { return loaded().config; }

Status configStatus() {
  const auto& errors = loaded().errors;
  if (errors.empty()) return Status::ok();
  std::string msg = "invalid configuration: ";
  for (size_t i = 0; i < errors.size(); ++i) {
    if (i > 0) msg += "; ";
    msg += errors[i];
  }
  return Status(ErrorCode::kInvalidArgument, msg);
}

const std::vector<KnobInfo>& knobInfos() { return loaded().infos; }

}  // namespace ferry
