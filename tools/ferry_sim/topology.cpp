// Topology files and the fat-tree fabric (topology.hpp has the model).
#include "tools/ferry_sim/topology.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>

namespace ferry::sim {
namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Links of one simulated host, in this order: ranks' out and in, NICs' out and in, each tier
// above the first's up and down per NIC, NVLink domains' out and in, the host's memory.
class FatTree final : public Fabric {
 public:
  FatTree(const Topology& t, int n, int period) : t_(t), n_(n) {
    const int g = t.ranksPerHost;
    hosts_ = std::max(1, (period + g - 1) / g);
    domainBase_ = 2 * g + 2 * t.nics + 2 * t.nics * (t.tiers - 1);
    perHost_ = domainBase_ + (t.domains() > 1 ? 2 * t.domains() : 0) + 1;
    period_ = period;
  }
  int links() const override { return hosts_ * perHost_ + 1 + (sharesCores() ? period_ : 0); }
  double capacity(int link) const override {
    if (link == hosts_ * perHost_) {
      // The shared fabric link, scaled to the simulated ranks' share of the real traffic.
      return t_.fabricBw > 0 ? t_.fabricBw * period_ / n_ : 1e30;
    }
    // A rank's own core, in the fabric link's bytes.
    if (link > hosts_ * perHost_) return t_.fabricBw / t_.sharedCores;
    int i = link % perHost_;
    const int g = t_.ranksPerHost;
    if (i < 2 * g) return t_.intraBw;
    i -= 2 * g;
    if (i < 2 * t_.nics) return t_.nicBw;
    i -= 2 * t_.nics;
    if (i < 2 * t_.nics * (t_.tiers - 1)) {
      const int tier = i / (2 * t_.nics) + 1;  // uplinks of tier `tier` (0-based: above tier 1)
      double over = 1;
      for (int k = 0; k < tier; ++k) over *= t_.tierOversub[k];
      return t_.nicBw / over;
    }
    if (link % perHost_ < perHost_ - 1) return t_.domainBw;
    return t_.hostMemBw > 0 ? t_.hostMemBw : 1e30;
  }
  double route(int src, int dst, std::vector<int>& path) const override {
    const int g = t_.ranksPerHost;
    const int hs = src / g, hd = dst / g;         // real hosts
    const int fs = hs, fd = (dst % period_) / g;  // simulated hosts (src is simulated)
    const int ls = src % g, ld = dst % g;
    const int bs = fs * perHost_, bd = fd * perHost_;
    if (hs == hd) {
      path.push_back(bs + 2 * ls);
      path.push_back(bd + 2 * ld + 1);
      if (t_.hostMemBw > 0) path.push_back(bs + perHost_ - 1);
      if (t_.domains() > 1 && ls / t_.domainRanks != ld / t_.domainRanks) {
        path.push_back(bs + domainBase_ + 2 * (ls / t_.domainRanks));
        path.push_back(bd + domainBase_ + 2 * (ld / t_.domainRanks) + 1);
        return t_.intraLatency + t_.domainLatency;
      }
      return t_.intraLatency;
    }
    const int ks = ls % t_.nics, kd = ld % t_.nics;
    // The lowest tier whose group holds both hosts (rails meet only above tier 1).
    int level = t_.tiers;
    for (int k = 0; k < t_.tiers; ++k) {
      const int per = t_.tierHosts[k] > 0 ? t_.tierHosts[k] : 1 << 30;
      if (hs / per == hd / per && !(k == 0 && t_.rail && ks != kd)) {
        level = k + 1;
        break;
      }
    }
    path.push_back(bs + 2 * g + 2 * ks);
    path.push_back(bd + 2 * g + 2 * kd + 1);
    for (int k = 1; k < level; ++k) {
      const int base = 2 * g + 2 * t_.nics + 2 * t_.nics * (k - 1);
      path.push_back(bs + base + 2 * ks);
      path.push_back(bd + base + 2 * kd + 1);
    }
    if (t_.fabricBw > 0) path.push_back(hosts_ * perHost_);
    return t_.nicLatency + 2 * (level - 1) * t_.hopLatency;
  }
  // A computation on shared cores: one core's worth of the fabric link at most, its byte costing
  // what a core spends on it over what a core spends on a byte between hosts.
  double computeRoute(int src, double rate, std::vector<int>& path) const override {
    if (!sharesCores()) return 0;
    path.push_back(hosts_ * perHost_);
    path.push_back(hosts_ * perHost_ + 1 + src);
    return t_.fabricBw / (t_.sharedCores * rate);
  }

 private:
  bool sharesCores() const { return t_.sharedCores > 0 && t_.fabricBw > 0; }

  const Topology& t_;
  int n_;
  int hosts_;
  int domainBase_;  // the first NVLink domain link of a host
  int perHost_;
  int period_;
};

}  // namespace

double Topology::streamBw() const { return fabricBw > 0 ? std::min(nicBw, fabricBw) : nicBw; }
double Topology::intraStreamBw() const { return hostMemBw > 0 ? std::min(intraBw, hostMemBw) : intraBw; }

std::unique_ptr<Fabric> Topology::fabric(int n, int period) const {
  return std::make_unique<FatTree>(*this, n, period);
}

Result<Topology> Topology::parse(const std::string& text) {
  Topology t;
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      return makeError(ErrorCode::kInvalidArgument, "topology line %d: expected key = value, got '%s'", lineNo,
                       line.c_str());
    }
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (key == "name") {
      t.name = value;
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end == nullptr || *end != '\0' || v < 0) {
      return makeError(ErrorCode::kInvalidArgument, "topology line %d: %s = '%s': expected a number >= 0", lineNo,
                       key.c_str(), value.c_str());
    }
    const int iv = static_cast<int>(v);
    if (key == "gpus_per_host") t.ranksPerHost = iv;
    else if (key == "intra_bw") t.intraBw = v;
    else if (key == "intra_latency") t.intraLatency = v;
    else if (key == "host_mem_bw") t.hostMemBw = v;
    else if (key == "nvlink_domain") t.domainRanks = iv;
    else if (key == "domain_bw") t.domainBw = v;
    else if (key == "domain_latency") t.domainLatency = v;
    else if (key == "nics_per_host") t.nics = iv;
    else if (key == "nic_bw") t.nicBw = v;
    else if (key == "nic_latency") t.nicLatency = v;
    else if (key == "hop_latency") t.hopLatency = v;
    else if (key == "rail") t.rail = iv != 0;
    else if (key == "tiers") t.tiers = iv;
    else if (key.size() == 11 && key.starts_with("tier") && key.ends_with("_hosts") && key[4] >= '1' && key[4] <= '3')
      t.tierHosts[key[4] - '1'] = iv;
    else if (key.size() == 13 && key.starts_with("tier") && key.ends_with("_oversub") && key[4] >= '1' && key[4] <= '3')
      t.tierOversub[key[4] - '1'] = std::max(1.0, v);
    else if (key == "fabric_bw") t.fabricBw = v;
    else if (key == "shared_cores") t.sharedCores = iv;
    else if (key == "reduce_bw") t.compute.reduce = v;
    else if (key == "copy_bw") t.compute.copy = v;
    else if (key == "slice_bytes") t.sliceBytes = static_cast<size_t>(v);
    else if (key == "pipeline_depth") t.depth = iv;
    else return makeError(ErrorCode::kInvalidArgument, "topology line %d: unknown key '%s'", lineNo, key.c_str());
  }
  if (t.ranksPerHost < 1 || t.nics < 1 || t.tiers < 1 || t.tiers > 3 || t.intraBw <= 0 || t.nicBw <= 0 ||
      t.sliceBytes == 0 || t.depth < 1) {
    return makeError(ErrorCode::kInvalidArgument,
                     "topology: gpus_per_host, nics_per_host, intra_bw, nic_bw, slice_bytes and pipeline_depth must "
                     "be > 0 and tiers 1..3 (got %d, %d, %g, %g, %zu, %d, %d)",
                     t.ranksPerHost, t.nics, t.intraBw, t.nicBw, t.sliceBytes, t.depth, t.tiers);
  }
  if (t.domainRanks > 0 && (t.ranksPerHost % t.domainRanks != 0 || (t.domains() > 1 && t.domainBw <= 0))) {
    return makeError(ErrorCode::kInvalidArgument,
                     "topology: nvlink_domain = %d must divide gpus_per_host = %d, and domain_bw must be > 0 when "
                     "a host has several domains (got %g)",
                     t.domainRanks, t.ranksPerHost, t.domainBw);
  }
  return t;
}

Result<Topology> Topology::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return makeError(ErrorCode::kInvalidArgument, "--topology %s: cannot open the file", path.c_str());
  std::stringstream ss;
  ss << f.rdbuf();
  auto t = parse(ss.str());
  if (!t.isOk()) return makeError(t.status().code(), "%s: %s", path.c_str(), t.status().message().c_str());
  if (t->name.empty()) t->name = path;
  return t;
}

}  // namespace ferry::sim
