// Logging with levels and subsystems, NCCL_DEBUG style.
//
// FERRY_DEBUG picks the level, FERRY_DEBUG_SUBSYS the subsystems. The macros test both before any
// argument is formatted, so a disabled log line costs one load and one branch. Each line is tagged
// with host, pid and the rank set by the communicator: "host:pid [r2] ferry INFO INIT: message".
#pragma once

#include <atomic>
#include <cstdint>

namespace ferry::log {

/// Levels in increasing verbosity; values as NCCL's NCCL_DEBUG.
enum class Level : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

/// Subsystem bits (FERRY_DEBUG_SUBSYS).
enum Subsys : uint32_t {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kNet = 1u << 3,
  kBootstrap = 1u << 4,
  kTune = 1u << 5,
  kEnv = 1u << 6,
  kTransport = 1u << 7,
  kAll = ~0u,
};

namespace detail {
extern std::atomic<int> gLevel;  // -1 until the configuration was read
extern std::atomic<uint32_t> gMask;
void initFromConfig();
inline bool enabled(Level level, uint32_t subsys) {
  int l = gLevel.load(std::memory_order_relaxed);
  if (l < 0) {
    initFromConfig();
    l = gLevel.load(std::memory_order_relaxed);
  }
  return static_cast<int>(level) <= l &&
         (level <= Level::kWarn || (gMask.load(std::memory_order_relaxed) & subsys) != 0);
}
}  // namespace detail

/// True when a line at this level and subsystem would be written.
inline bool enabled(Level level, uint32_t subsys) { return detail::enabled(level, subsys); }

/// Format and write one line. Call through the macros.
void write(Level level, uint32_t subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/// Replace the level FERRY_DEBUG chose (a front end's own default, e.g. the NCCL API's silence
/// when neither FERRY_DEBUG nor NCCL_DEBUG is set, as NCCL's library is).
void setLevel(Level level);

/// Tag this process's lines with a rank (-1: no rank yet).
void setRank(int rank);

/// Parse "INIT,COLL" / "ALL" / "^NET" into a mask. Unknown names are ignored with a warning.
uint32_t parseSubsys(const char* text);
/// Parse "INFO" etc.; returns false for unknown text.
bool parseLevel(const char* text, Level* out);

}  // namespace ferry::log

#define FERRY_LOG(level, subsys, ...)                      \
  do {                                                     \
    if (::ferry::log::enabled((level), (subsys))) {        \
      ::ferry::log::write((level), (subsys), __VA_ARGS__); \
    }                                                      \
  } while (0)
#define FERRY_WARN(subsys, ...) FERRY_LOG(::ferry::log::Level::kWarn, (subsys), __VA_ARGS__)
#define FERRY_INFO(subsys, ...) FERRY_LOG(::ferry::log::Level::kInfo, (subsys), __VA_ARGS__)
#define FERRY_TRACE(subsys, ...) FERRY_LOG(::ferry::log::Level::kTrace, (subsys), __VA_ARGS__)
