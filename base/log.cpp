#include "log.hpp"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <strings.h>

#include "config.hpp"

namespace ferry::log {
namespace detail {
std::atomic<int> gLevel{-1};
std::atomic<uint32_t> gMask{0};
}  // namespace detail

namespace {

std::atomic<int> gRank{-1};
std::mutex gInitMutex;
FILE* gOut = nullptr;
char gHost[64] = "?";

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kInit}, {"COLL", kColl},           {"P2P", kP2p},
    {"NET", kNet},   {"BOOTSTRAP", kBootstrap}, {"TUNE", kTune},
    {"ENV", kEnv},   {"TRANSPORT", kTransport}, {"ALL", kAll},
};

const char* subsysName(uint32_t subsys) {
  for (const auto& s : kSubsysNames) {
    if (s.bit == subsys) return s.name;
  }
  return "ALL";
}

const char* levelName(Level level) {
  switch (level) {
    case Level::kVersion: return "VERSION";
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kTrace: return "TRACE";
    default: return "NONE";
  }
}

// Expands %h (host) and %p (pid) in FERRY_DEBUG_FILE.
std::string expandPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'h') {
        out += gHost;
        continue;
      }
      if (c == 'p') {
        out += std::to_string(getpid());
        continue;
      }
      out += '%';
    }
    out += pattern[i];
  }
  return out;
}

}  // namespace

bool parseLevel(const char* text, Level* out) {
  static const std::pair<const char*, Level> kLevels[] = {{"NONE", Level::kNone},
                                                          {"VERSION", Level::kVersion},
                                                          {"WARN", Level::kWarn},
                                                          {"INFO", Level::kInfo},
                                                          {"TRACE", Level::kTrace}};
  for (const auto& [name, level] : kLevels) {
    if (strcasecmp(text, name) == 0) {
      *out = level;
      return true;
    }
  }
  return false;
}

uint32_t parseSubsys(const char* text) {
  bool invert = text[0] == '^';
  if (invert) ++text;
  uint32_t mask = 0;
  std::string s(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const auto& n : kSubsysNames) {
      if (strcasecmp(tok.c_str(), n.name) == 0) mask |= n.bit;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

namespace detail {
void initFromConfig() {
  std::lock_guard<std::mutex> lock(gInitMutex);
  if (gLevel.load() >= 0) return;
  gethostname(gHost, sizeof(gHost) - 1);
  const Config& c = config();
  Level level = Level::kWarn;
  if (!parseLevel(c.debug.c_str(), &level)) {
    std::fprintf(stderr, "ferry WARN: FERRY_DEBUG='%s' is not one of NONE, VERSION, WARN, INFO, TRACE; using WARN\n",
                 c.debug.c_str());
  }
  gOut = stderr;
  if (!c.debugFile.empty()) {
    std::string path = expandPath(c.debugFile);
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      gOut = f;
    } else {
      std::fprintf(stderr, "ferry WARN: cannot open FERRY_DEBUG_FILE '%s': %s; logging to stderr\n", path.c_str(),
                   std::strerror(errno));
    }
  }
  gMask.store(parseSubsys(c.debugSubsys.c_str()));
  gLevel.store(static_cast<int>(level));
}
}  // namespace detail

void setLevel(Level level) {
  detail::initFromConfig();  // the output and subsystems still come from the configuration
  detail::gLevel.store(static_cast<int>(level));
}

void setRank(int rank) { gRank.store(rank); }

void write(Level level, uint32_t subsys, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  char rank[16] = "";
  int r = gRank.load(std::memory_order_relaxed);
  if (r >= 0) std::snprintf(rank, sizeof(rank), " [r%d]", r);
  // One fprintf per line keeps lines whole when several threads log at once.
  std::fprintf(gOut != nullptr ? gOut : stderr, "%s:%d%s ferry %s %s: %s\n", gHost, getpid(), rank, levelName(level),
               subsysName(subsys), msg);
  if (gOut != nullptr && gOut != stderr) std::fflush(gOut);
}

}  // namespace ferry::log
