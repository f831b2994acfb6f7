// The replay: every simulated rank runs its recorded program (program.hpp) in virtual time over a
// modelled machine (fabric.hpp).
//
// Messages are flows. A flow starts when its send is posted and shares bandwidth max-min fairly
// with every flow active at the same time on the links it crosses (progressive filling: the link
// with the smallest share per flow fixes its flows' rate, which is taken off the other links they
// cross, until every flow has a rate). The send completes when its last byte left; the message
// arrives one latency later and completes the matching receive (posted then or later: matching is
// in order per sender and receiver, like the transports'). Reductions and copies occupy their rank
// for bytes / rate.
//
// Event batching: every event due at the same virtual time (to a picosecond) is handled before the
// rates are computed again, so ranks that move in step cost one rate computation per step; and
// that computation covers only the flows sharing links with those that started or left
// (RateScope), whose finish times wait in a queue.
//
// Symmetry: with `period` p < n, only ranks 0..p-1 run; real rank r stands for simulated rank
// r mod p shifted by r - r mod p, so a message is matched by (sender mod p, receiver mod p,
// receiver - sender mod n); under the XOR fold, receiver XOR sender instead. This is exact when rank r + p's program is
// rank r's with every peer moved by p and the machine looks the same from every block of p ranks (ferry-sim checks the
// first; topology.hpp folds hosts for the second).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tools/ferry_sim/fabric.hpp"
#include "tools/ferry_sim/program.hpp"

namespace ferry::sim {

/// How a real rank stands for a simulated one (ferry-sim checks which holds): real rank r acts as
/// simulated rank r mod p with every peer moved by r - r mod p (kShift), or XORed with it (kXor).
enum class Fold : uint8_t { kShift, kXor };

/// Compute rates of a rank, bytes per second (0: free).
struct ComputeRates {
  double reduce = 0;
  double copy = 0;
};

/// What one replay found.
struct ReplayResult {
  double seconds = 0;     ///< when the last rank finished its program
  bool complete = false;  ///< false: some rank waited forever (a receive no send matched)
  size_t flows = 0;       ///< messages replayed
  size_t batches = 0;     ///< rate computations
};

/// Which flows get new rates when a flow starts or leaves. Max-min fair rates split into
/// components of flows linked by shared links, so recomputing only the changed flows' component
/// (kComponent) gives the rates of recomputing every active flow (kEveryFlow), which the tests
/// replay as the reference; at 16,384 ranks the component is a few hosts' flows of thousands.
enum class RateScope : uint8_t { kComponent, kEveryFlow };

/// Replay `programs` (one per simulated rank: programs.size() is the period) of an n-rank call.
ReplayResult replay(const Fabric& fabric, const std::vector<Program>& programs, int n, const ComputeRates& rates,
                    Fold fold = Fold::kShift, RateScope scope = RateScope::kComponent);

/// Max-min fair rates of flows over links: `paths[f]` lists flow f's links, `capacity` each link's
/// bytes per second. A flow with no link gets +infinity. Exposed for the unit tests.
std::vector<double> maxMinRates(const std::vector<std::vector<int>>& paths, const std::vector<double>& capacity);

}  // namespace ferry::sim
