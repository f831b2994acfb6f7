#include "runtime/host_layout.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace ferry {

HostLayout HostLayout::fromHostIds(const std::vector<std::string>& hostIds) {
  HostLayout l;
  std::vector<std::string> seen;
  for (size_t r = 0; r < hostIds.size(); ++r) {
    auto it = std::find(seen.begin(), seen.end(), hostIds[r]);
    int h = static_cast<int>(it - seen.begin());
    if (it == seen.end()) {
      seen.push_back(hostIds[r]);
      l.members.emplace_back();
    }
    l.hostOf.push_back(h);
    l.localOf.push_back(static_cast<int>(l.members[static_cast<size_t>(h)].size()));
    l.members[static_cast<size_t>(h)].push_back(static_cast<int>(r));
  }
  l.hosts = static_cast<int>(seen.size());
  return l;
}

int HostLayout::maxLocalSize() const {
  int m = 0;
  for (const auto& g : members) m = std::max(m, static_cast<int>(g.size()));
  return m;
}

bool HostLayout::even() const {
  for (const auto& g : members) {
    if (g.size() != members[0].size()) return false;
  }
  return true;
}

std::vector<int> HostLayout::crossGroup(int local) const {
  std::vector<int> g;
  for (const auto& m : members) {
    if (local < static_cast<int>(m.size())) g.push_back(m[static_cast<size_t>(local)]);
  }
  return g;
}

int HostLayout::rankAt(int host, int local) const {
  if (host < 0 || host >= hosts || local < 0 || local >= localSize(host)) return -1;
  return members[static_cast<size_t>(host)][static_cast<size_t>(local)];
}

int HostLayout::linksPerHost(const std::vector<std::string>& rdmaPorts) const {
  int fewest = 0;
  for (const auto& m : members) {
    std::set<std::string> ports;
    for (int r : m) {
      const std::string& list = r < static_cast<int>(rdmaPorts.size()) ? rdmaPorts[static_cast<size_t>(r)] : "";
      for (size_t at = 0; at < list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        if (end > at) ports.insert(list.substr(at, end - at));
        at = end + 1;
      }
    }
    const int links = std::max<int>(1, static_cast<int>(ports.size()));
    fewest = fewest == 0 ? links : std::min(fewest, links);
  }
  return std::max(fewest, 1);
}

std::string HostLayout::describe() const {
  std::string s = std::to_string(hosts) + (hosts == 1 ? " host:" : " hosts:");
  for (int h = 0; h < hosts; ++h) {
    s += h == 0 ? " " : " | ";
    const auto& m = members[static_cast<size_t>(h)];
    // Runs of consecutive ranks as a-b.
    for (size_t i = 0; i < m.size();) {
      size_t j = i;
      while (j + 1 < m.size() && m[j + 1] == m[j] + 1) ++j;
      if (i > 0) s += ",";
      s += j > i ? std::to_string(m[i]) + "-" + std::to_string(m[j]) : std::to_string(m[i]);
      i = j + 1;
    }
  }
  return s;
}

std::string renumberRanks(const std::string& text, const std::vector<int>& members) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    size_t hit = text.find("rank ", at);
    if (hit == std::string::npos) break;
    size_t digits = hit + 5, end = digits;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    out.append(text, at, digits - at);
    at = digits;
    const bool word = hit == 0 || !std::isalnum(static_cast<unsigned char>(text[hit - 1]));
    if (!word || end == digits || end - digits > 6) continue;
    const int r = std::stoi(text.substr(digits, end - digits));
    if (r < 0 || r >= static_cast<int>(members.size())) continue;
    out += std::to_string(members[static_cast<size_t>(r)]);
    at = end;
  }
  out.append(text, at, std::string::npos);
  return out;
}

std::string renumberBeforeParent(const std::string& text, const std::vector<int>& members) {
  // The parent's words start at the first "communicator aborted: " or at the "rank N" of the
  // first "rank N failed and reported: ", whichever comes first.
  size_t parent = text.find("communicator aborted: ");
  const size_t reported = text.find(" failed and reported: ");
  if (reported != std::string::npos) {
    const size_t rank = text.rfind("rank ", reported);
    if (rank != std::string::npos && rank < parent) parent = rank;
  }
  if (parent == std::string::npos) return renumberRanks(text, members);
  return renumberRanks(text.substr(0, parent), members) + text.substr(parent);
}

}  // namespace ferry
