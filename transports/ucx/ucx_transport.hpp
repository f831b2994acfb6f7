// The UCX transport: ucp tagged messaging between the ranks of one communicator.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "transports/transport.hpp"

namespace ferry::transport::ucx {

/// How to set up the ucp context and worker.
struct UcxOptions {
  int rank = 0;
  int size = 1;
  /// Value for UCX's NET_DEVICES ("lo" when every rank shares a host); empty: UCX's own choice.
  std::string netDevices;
  /// sameHost[r]: rank r runs on this host. UCX 1.13 offers shared memory only to endpoints
  /// without peer error handling, so same-host endpoints go without it (the runtime watches
  /// same-host peers' processes instead) and other endpoints use it.
  std::vector<bool> sameHost;
};

/// A ucp context and worker for one communicator; connect() creates an endpoint per peer with
/// UCX's peer error handling, so a dead peer fails requests instead of hanging them.
Result<std::unique_ptr<Transport>> createUcxTransport(const UcxOptions& options);

}  // namespace ferry::transport::ucx
