#include "test/transports/rank_harness.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <random>

#include "transports/shm/shm_transport.hpp"
#include <netinet/in.h>

#include "transports/tcp/tcp_transport.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace ferry::test {
namespace {

using transport::Request;
using transport::Transport;

// From here on this process's process_vm_readv fails with EPERM, as under a container's seccomp
// profile or a hardened kernel: a filter cannot be removed, and each rank is a process of its own.
bool refuseCrossMemoryReads() {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return false;
#endif
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(code)), code};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

Result<std::unique_ptr<Transport>> createTransport(const std::string& name, int rank, int size, uint64_t commId) {
  if (name == "ucx" || name == "ucx-local") {
    transport::ucx::UcxOptions o;
    o.rank = rank;
    o.size = size;
    // "ucx": endpoints with UCX's peer error handling (TCP over loopback). "ucx-local": every
    // peer marked as on this host, as the runtime creates it on one machine (UCX's shared memory,
    // no peer error handling).
    if (name == "ucx-local") o.sameHost.assign(size, true);
    // Every rank is on this host; keep UCX on loopback unless the environment chose otherwise.
    if (std::getenv("UCX_NET_DEVICES") == nullptr) o.netDevices = "lo";
    return transport::ucx::createUcxTransport(o);
  }
  if (name == "shm" || name == "shm-rings" || name == "shm-refused") {
    transport::shm::ShmOptions o;
    o.rank = rank;
    o.size = size;
    o.commId = commId;
    // shm-rings: single-copy reads turned off, every message through the rings. shm-refused: the
    // kernel refuses them, which the transport must find out for itself.
    o.singleCopy = name != "shm-rings";
    if (name == "shm-refused" && !refuseCrossMemoryReads()) {
      return makeError(ErrorCode::kSystemError, "cannot install a seccomp filter: %s", std::strerror(errno));
    }
    return transport::shm::createShmTransport(o);
  }
  if (name == "tcp" || name == "tcp-1") {
    // "tcp": every peer counted as on another host, so pairs use 4 streams and large messages are
    // split; "tcp-1": one stream per pair. Loopback either way.
    transport::tcp::TcpOptions o;
    o.rank = rank;
    o.size = size;
    o.commId = commId;
    auto* in = reinterpret_cast<sockaddr_in*>(&o.bind);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    o.bindLength = sizeof(sockaddr_in);
    o.streams = name == "tcp" ? 4 : 1;
    // "tcp-1" waits as the runtime sets it up (polling for 200 us before blocking), "tcp" blocks in
    // poll() at once: both ways of waiting stay covered.
    o.spinUs = name == "tcp" ? 0 : 200;
    o.connectSeconds = 20;
    return transport::tcp::createTcpTransport(o);
  }
  return makeError(ErrorCode::kInvalidArgument, "no transport named '%s' in this test program", name.c_str());
}

// Writes `bytes` to dir/addr.<rank> atomically (a rename), so readers never see half a file.
bool publishAddress(const std::string& dir, int rank, const std::vector<uint8_t>& bytes) {
  std::string final = dir + "/addr." + std::to_string(rank);
  std::string tmp = final + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), final.c_str()) == 0;
}

// Reads every rank's address, waiting for the files until `deadline`; "" or what is missing.
std::string gatherAddresses(const std::string& dir, int size, const Deadline& deadline,
                            std::vector<std::vector<uint8_t>>* addrs) {
  addrs->assign(size, {});
  for (int r = 0; r < size; ++r) {
    std::string path = dir + "/addr." + std::to_string(r);
    struct stat st {};
    while (stat(path.c_str(), &st) != 0) {
      if (deadline.expired()) return "rank " + std::to_string(r) + " never published its address";
      usleep(1000);
    }
    std::ifstream f(path, std::ios::binary);
    (*addrs)[r].assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return "";
}

// Runs in a forked rank: bootstrap, body, final barrier. Returns the exit code.
int rankMain(const std::string& name, int rank, int size, uint64_t commId, const std::string& dir,
             const TransportBody& body) {
  auto created = createTransport(name, rank, size, commId);
  if (!created.isOk()) {
    std::fprintf(stderr, "rank %d: creating %s failed: %s\n", rank, name.c_str(), created.status().toString().c_str());
    return 2;
  }
  std::unique_ptr<Transport> t = std::move(*created);
  Deadline setup = Deadline::after(20);
  std::vector<std::vector<uint8_t>> addrs;
  std::string err;
  if (!publishAddress(dir, rank, t->localAddress())) {
    err = "cannot publish the address in " + dir;
  } else {
    err = gatherAddresses(dir, size, setup, &addrs);
  }
  if (err.empty()) {
    Status s = t->connect(addrs);
    if (!s.isOk()) err = "connect failed: " + s.toString();
  }
  RankContext ctx(rank, size, &t, dir);
  if (err.empty()) err = ctx.barrier();
  if (!err.empty()) {
    std::fprintf(stderr, "rank %d: bootstrap: %s\n", rank, err.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(2);  // leave the transport as it is: its teardown is not what failed
  }
  t->sealed();
  try {
    err = body(ctx);
  } catch (const std::exception& e) {
    err = std::string("exception: ") + e.what();
  }
  if (err.rfind(kSkipPrefix, 0) == 0) {
    std::fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
    return 77;
  }
  // Short: a peer that failed has exited without this barrier, and its failure is the one to read.
  if (err.empty() && !ctx.finalBarrierOff()) err = "final " + ctx.barrier(10);
  if (err == "final ") err.clear();
  if (!err.empty()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(1);  // a failed rank may have requests in flight: no teardown that could touch them
  }
  t.reset();
  return 0;
}

void removeDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d != nullptr) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    }
    closedir(d);
    for (const auto& n : names) unlink((dir + "/" + n).c_str());
  }
  rmdir(dir.c_str());
}

}  // namespace

const std::vector<std::string>& transportNames() {
  static const std::vector<std::string> names = {"ucx", "ucx-local", "shm", "shm-rings", "shm-refused", "tcp", "tcp-1"};
  return names;
}

std::string RankContext::waitAll(Request* reqs, size_t count, double seconds, const std::string& what) {
  Deadline deadline = Deadline::after(seconds);
  Backoff backoff;
  size_t i = 0;  // every request before i has left kPending
  for (;;) {
    while (i < count && !reqs[i].pending()) ++i;
    if (i == count) return "";
    if (deadline.expired()) {
      size_t left = 0;
      for (size_t j = i; j < count; ++j) left += reqs[j].pending();
      return what + ": " + std::to_string(left) + " of " + std::to_string(count) + " requests still pending after " +
             std::to_string(seconds) + " s (first: #" + std::to_string(i) + ")";
    }
    if (transport().progress()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

void RankContext::spin(double seconds) {
  Deadline deadline = Deadline::after(seconds);
  Backoff backoff;
  while (!deadline.expired()) {
    if (transport().progress()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

void RankContext::mark(const std::string& name) {
  const std::string path = dir_ + "/mark." + name;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
}

bool RankContext::spinUntilMarked(const std::string& name, double seconds) {
  const std::string path = dir_ + "/mark." + name;
  Deadline deadline = Deadline::after(seconds);
  Backoff backoff;
  while (access(path.c_str(), F_OK) != 0) {
    if (deadline.expired()) return false;
    // The transport may be gone on this side too (destroyTransport): then only the file is polled.
    if (*owner_ != nullptr && transport().progress()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
  return true;
}

std::string RankContext::barrier(double seconds) {
  std::vector<Request> reqs(2 * static_cast<size_t>(size_));
  size_t used = 0;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    Status s = transport().postRecv(p, kBarrierTag, transport::kTagMask, nullptr, 0, &reqs[used++]);
    if (!s.isOk()) return "barrier: postRecv from " + std::to_string(p) + ": " + s.toString();
  }
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    Status s = transport().postSend(p, kBarrierTag, nullptr, 0, &reqs[used++]);
    if (!s.isOk()) return "barrier: postSend to " + std::to_string(p) + ": " + s.toString();
  }
  std::string err = waitAll(reqs.data(), used, seconds, "barrier");
  if (!err.empty()) return err;
  for (size_t i = 0; i < used; ++i) {
    if (reqs[i].state != Request::State::kDone) {
      return "barrier: request to/from rank " + std::to_string(reqs[i].peer) + " failed: " + reqs[i].error;
    }
  }
  return "";
}

TransportProbe probeTransport(const std::string& name) {
  TransportProbe probe;
  int p[2];
  if (pipe(p) != 0) {
    probe.why = "pipe failed";
    return probe;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    std::random_device rd;
    // Two ranks, never connected: capabilities may depend on how the peers are reached (UCX
    // endpoints to same-host peers have no peer error handling), and a lone rank has no peers.
    auto created = createTransport(name, 0, 2, (uint64_t{rd()} << 32) | rd());
    std::string msg;
    if (created.isOk()) {
      std::unique_ptr<Transport> t = std::move(*created);
      transport::Capabilities c = t->capabilities();
      msg = std::string("1") + (c.zeroCopy ? "1" : "0") + (c.deviceMemory ? "1" : "0") +
            (c.detectsPeerDeath ? "1" : "0") + (c.buffersSends ? "1" : "0") + t->name();
      t.reset();  // released before exiting, as a rank would
    } else {
      msg = "00000" + created.status().toString();
    }
    ssize_t w = write(p[1], msg.data(), msg.size());
    (void)w;
    _exit(0);
  }
  close(p[1]);
  std::string msg;
  char buf[512];
  ssize_t got;
  while ((got = read(p[0], buf, sizeof(buf))) > 0) msg.append(buf, static_cast<size_t>(got));
  close(p[0]);
  waitpid(pid, nullptr, 0);
  if (msg.size() < 5) {
    probe.why = "the probe process died";
    return probe;
  }
  probe.available = msg[0] == '1';
  probe.caps.zeroCopy = msg[1] == '1';
  probe.caps.deviceMemory = msg[2] == '1';
  probe.caps.detectsPeerDeath = msg[3] == '1';
  probe.caps.buffersSends = msg[4] == '1';
  (probe.available ? probe.name : probe.why) = msg.substr(5);
  return probe;
}

std::vector<RankOutcome> runTransportRanks(const std::string& name, int n, const TransportBody& body,
                                           double timeoutSeconds) {
  std::vector<RankOutcome> out(n);
  char tmpl[] = "/tmp/ferry-tconf-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    for (auto& o : out) o.output = "mkdtemp failed";
    return out;
  }
  const std::string dir = tmpl;
  std::random_device rd;
  const uint64_t commId = (uint64_t{rd()} << 32) | rd();
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(n, -1);
  std::vector<int> fds(n, -1);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) {
      out[r].output = "pipe failed";
      continue;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      dup2(p[1], 1);
      dup2(p[1], 2);
      close(p[1]);
      for (int fd : fds) {
        if (fd >= 0) close(fd);  // earlier ranks' pipes: their EOF must not wait for this rank
      }
      // The test runner's crash handlers are the parent's: a rank that crashes just dies, and the
      // parent reports its signal and output.
      for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTERM, SIGINT}) signal(sig, SIG_DFL);
      int code = rankMain(name, r, n, commId, dir, body);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  Deadline deadline = Deadline::after(timeoutSeconds);
  int open = 0;
  for (int fd : fds) open += fd >= 0;
  bool killed = false;
  while (open > 0) {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r) {
      if (fds[r] >= 0) {
        pfds.push_back({fds[r], POLLIN, 0});
        who.push_back(r);
      }
    }
    poll(pfds.data(), pfds.size(), 200);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      char buf[4096];
      ssize_t got = read(pfds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        out[who[i]].output.append(buf, static_cast<size_t>(got));
      } else {
        close(fds[who[i]]);
        fds[who[i]] = -1;
        --open;
      }
    }
    if (!killed && deadline.expired()) {
      for (pid_t pid : pids) {
        if (pid > 0) kill(pid, SIGKILL);
      }
      killed = true;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (pids[r] <= 0) continue;
    int st = 0;
    waitpid(pids[r], &st, 0);
    out[r].exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (killed) out[r].output += "\n(killed by the harness after " + std::to_string(timeoutSeconds) + " s)";
  }
  removeDir(dir);
  return out;
}

std::string summarize(const std::vector<RankOutcome>& outcomes, const std::vector<int>& expected) {
  std::string s;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    int want = r < expected.size() ? expected[r] : 0;
    if (outcomes[r].exitCode != want) {
      s += "rank " + std::to_string(r) + " exit " + std::to_string(outcomes[r].exitCode) + " (expected " +
           std::to_string(want) + "): " + outcomes[r].output.substr(0, 3000) + "\n";
    }
  }
  return s;
}

}  // namespace ferry::test
