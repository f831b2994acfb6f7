// The smallest complete ferry program: join from the environment, all-reduce, verify.
//
//   build/tools/ferryrun -n 4 build/examples/allreduce_example
//
// Every rank contributes rank+1 in each of 1M floats; each element of the result must be
// n(n+1)/2 on every rank.
#include <cstdio>
#include <vector>

#include "ferry/ferry.hpp"

int main() {
  auto comm = ferry::Comm::fromEnv();
  if (!comm.isOk()) {
    std::fprintf(stderr, "cannot join: %s\n", comm.status().toString().c_str());
    return 1;
  }
  ferry::Comm& c = **comm;
  const size_t count = 1 << 20;
  std::vector<float> data(count, static_cast<float>(c.rank() + 1));
  ferry::Status s = c.allReduce(data.data(), data.data(), count, ferry::DataType::kFloat32, ferry::RedOp::kSum);
  if (!s.isOk()) {
    std::fprintf(stderr, "allReduce failed: %s\n", s.toString().c_str());
    return 1;
  }
  const float expected = static_cast<float>(c.size() * (c.size() + 1) / 2);
  size_t wrong = 0;
  for (float v : data) wrong += v != expected;
  std::printf("rank %d of %d: allReduce(sum) of %zu floats: %s (every element %g, expected %g)\n", c.rank(), c.size(),
              count, wrong == 0 ? "verified" : "WRONG", static_cast<double>(data[0]), static_cast<double>(expected));
  return wrong == 0 ? 0 : 1;
}
