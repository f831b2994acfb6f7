#include "test/transports/conformance.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

using ferry::transport::Request;

namespace ferry::test {
namespace {
std::string gName;
TransportProbe gProbe;
}  // namespace

const std::string& transportUnderTest() { return gName; }
const TransportProbe& setTransportUnderTest(const std::string& name) {
  gName = name;
  gProbe = probeTransport(name);
  return gProbe;
}
const TransportProbe& probeUnderTest() { return gProbe; }

std::string checkReceived(const Request& r, int source, uint64_t tag, size_t bytes, const std::string& what) {
  if (r.state != Request::State::kDone)
    return what + ": receive ended " + (r.pending() ? "pending" : "failed: " + r.error);
  if (r.source != source) return what + ": source " + std::to_string(r.source) + ", expected " + std::to_string(source);
  if (r.peerTag != tag) return what + ": peerTag " + std::to_string(r.peerTag) + ", expected " + std::to_string(tag);
  if (r.received != bytes) {
    return what + ": received " + std::to_string(r.received) + " bytes, expected " + std::to_string(bytes);
  }
  return "";
}

std::string checkSent(const Request& r, const std::string& what) {
  if (r.state == Request::State::kDone) return "";
  return what + ": send ended " + (r.pending() ? "pending" : "failed: " + r.error);
}

bool runAndCheck(int n, const TransportBody& body, double timeoutSeconds, const std::vector<int>& expected) {
  auto outcomes = runTransportRanks(gName, n, body, timeoutSeconds);
  if (std::getenv("FERRY_TEST_VERBOSE") != nullptr) {  // every rank's output, passing or not
    for (size_t r = 0; r < outcomes.size(); ++r) {
      std::printf("--- rank %zu (exit %d)\n%s", r, outcomes[r].exitCode, outcomes[r].output.c_str());
    }
  }
  bool allSkipped = true;
  for (const auto& o : outcomes) allSkipped &= o.exitCode == 77;
  if (allSkipped) {
    WARN("skipped on " << gName << ": " << outcomes[0].output);
    return false;
  }
  INFO(gName << ", " << n << " ranks");
  CHECK(summarize(outcomes, expected) == "");
  return true;
}

}  // namespace ferry::test
