// Ranks as threads of one test process.
#pragma once

#include <functional>
#include <thread>
#include <vector>

namespace ferry::test {

/// Runs body(rank) on one thread per rank, joins them all and returns each rank's result.
template <typename R>
std::vector<R> onRankThreads(int n, const std::function<R(int)>& body) {
  std::vector<R> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { results[static_cast<size_t>(r)] = body(r); });
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace ferry::test
