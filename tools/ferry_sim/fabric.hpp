// What the replay asks of a modelled machine: links with capacities, and for each message the
// links it crosses and its latency.
#pragma once

#include <vector>

namespace ferry::sim {

/// One machine for one replay: links are numbered 0..links()-1. Simulated ranks are the first
/// ones of the call; every other real rank behaves as one of them (replay.hpp, "Symmetry"), so the
/// fabric holds only the simulated ranks' share of the machine.
class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual int links() const = 0;
  /// Bytes per second of `link`.
  virtual double capacity(int link) const = 0;
  /// The links a message from simulated rank `src` to real rank `dst` crosses (appended to
  /// `path`), and its latency in seconds (first byte sent to last byte received, at no load).
  virtual double route(int src, int dst, std::vector<int>& path) const = 0;
  /// Where a reduction or copy of simulated rank `src`, computed at `rate` bytes per second when
  /// alone, takes its time from: the links it occupies (appended to `path`) and the bytes it puts
  /// on them per byte computed. 0 (the default): it occupies its rank alone, bytes / rate.
  virtual double computeRoute(int /*src*/, double /*rate*/, std::vector<int>& /*path*/) const { return 0; }
};

}  // namespace ferry::sim
