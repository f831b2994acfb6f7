// State dumps: `kill -USR1 <pid>` makes every communicator of the process print, one line each,
// where its current call stands (operation, sequence number, phase and step, the peer it waits
// for and for how long) without stopping anything. Nobody has to attach a debugger to learn why
// a job is stuck.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "collectives/context.hpp"

namespace ferry {

/// Registers a communicator's trace for dumps while it lives.
class StateDumpRegistration {
 public:
  /// `extra` (optional) adds a line to the communicator's dump when it returns text (the GPU's
  /// timeout record); it runs on the dump thread.
  StateDumpRegistration(uint64_t commId, int rank, int size, const coll::CallTrace* trace,
                        std::function<std::string()> extra = {});
  ~StateDumpRegistration();
  StateDumpRegistration(const StateDumpRegistration&) = delete;
  StateDumpRegistration& operator=(const StateDumpRegistration&) = delete;

 private:
  uint64_t key_;
};

/// One line describing a communicator's state ("comm 4b96... rank 1/4: allReduce(count=...) #12 in
/// reduce-scatter step 2/3 waiting for rank 0 for 3.2 s").
std::string describeState(uint64_t commId, int rank, int size, const coll::CallTrace& trace);

/// Print every registered communicator's state now (what SIGUSR1 triggers).
void dumpAllStates();

}  // namespace ferry
