// The network between hosts, measured once per communicator that spans hosts: what the tuner's
// message algorithms cost there (host_model.hpp, NetLevel).
#pragma once

#include "ferry/comm.hpp"
#include "runtime/host_model.hpp"

namespace ferry {

/// Every rank of `comm` calls this at the same point. Ranks `a` and `b` (on different hosts)
/// exchange round trips of a few bytes (alpha: half the best) and transfers of 2 MiB answered by a
/// few bytes (beta: what the best adds to a round trip, per byte), the best of several since the
/// first ones include connecting; then rank `a` broadcasts its figures, so every rank tunes with
/// the same numbers. About 20 round trips and 6 MiB between a and b.
Result<NetLevel> probeNetwork(Comm& comm, int a, int b);

}  // namespace ferry
