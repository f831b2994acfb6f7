// Decoding verbs' port encodings into names and rates. The values are infiniband/verbs.h's
// (ibv_port_state, the IB_WIDTH_* and IB_SPEED_* bits of active_width and active_speed, the
// IBV_LINK_LAYER_* enum), written out here so the decoding does not need the header and a build
// without libibverbs still reports fakes and tests the same way.
#include <arpa/inet.h>
#include <netinet/in.h>

#include "transports/nic/nic_discovery.hpp"

namespace ferry::transport::nic {
namespace {

// One per-lane speed grade: active_speed's bit, its name, its nominal per-lane rate.
struct SpeedGrade {
  int bit;
  const char* name;
  double gbps;
};

// Nominal rates as the kernel's sysfs "rate" file and NCCL count them (see nic_discovery.hpp).
constexpr SpeedGrade kSpeedGrades[] = {
    {1, "SDR", 2.5}, {2, "DDR", 5},   {4, "QDR", 10},    {8, "FDR10", 10},  {16, "FDR", 14},
    {32, "EDR", 25}, {64, "HDR", 50}, {128, "NDR", 100}, {256, "XDR", 200},  // XDR: active_speed_ex
};

const SpeedGrade* findGrade(int activeSpeed) {
  for (const SpeedGrade& g : kSpeedGrades) {
    if (g.bit == activeSpeed) return &g;
  }
  return nullptr;
}

}  // namespace

std::string portStateName(int state) {
  switch (state) {
    case 0: return "NOP";
    case 1: return "DOWN";
    case 2: return "INIT";
    case 3: return "ARMED";
    case 4: return "ACTIVE";
    case 5: return "ACTIVE_DEFER";
    default: return "state " + std::to_string(state);
  }
}

int laneCount(int activeWidth) {
  switch (activeWidth) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

const char* speedName(int activeSpeed) {
  const SpeedGrade* g = findGrade(activeSpeed);
  return g != nullptr ? g->name : nullptr;
}

double laneGbps(int activeSpeed) {
  const SpeedGrade* g = findGrade(activeSpeed);
  return g != nullptr ? g->gbps : 0.0;
}

std::string linkLayerName(int linkLayer) {
  switch (linkLayer) {
    case 0:  // IBV_LINK_LAYER_UNSPECIFIED: drivers from before RoCE, all of them InfiniBand
    case 1: return "InfiniBand";
    case 2: return "Ethernet";
    default: return "unknown (" + std::to_string(linkLayer) + ")";
  }
}

std::string formatGid(const Gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.data(), text, sizeof(text)) == nullptr) return {};
  return text;
}

}  // namespace ferry::transport::nic
