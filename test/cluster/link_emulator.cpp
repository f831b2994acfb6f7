// ferry-link-emulator: one shaped network link between a namespace host and the cluster's switch,
// for kernels without the netem qdisc (test/cluster/cluster.sh runs one per host when asked for
// a delay or a loss rate).
//
// The link is a pair of TAP devices: one inside the host's network namespace (its "eth0"), one
// inside the switch's namespace (the bridge port). This process holds both and carries every
// frame from one to the other:
//   - rate: frames leave each end one after another at RATE bits per second, like bits on a wire
//     (a frame departs when the previous one has finished, plus its own serialisation time);
//   - delay: frames from the host reach the switch DELAY after they finished leaving the host
//     (so a message from one host to another takes DELAY, a round trip 2 * DELAY);
//   - loss: each frame from the host is dropped with probability LOSS.
// Frames wait in a queue per direction of at most --limit bytes (dropped beyond: a full queue).
//
// Offloads: without loss, both TAPs take TCP segmentation offload (IFF_VNET_HDR, TUNSETOFFLOAD), so
// a frame may be a 64 KiB TCP super-segment that the receiving stack takes as it is; its time on
// the wire counts the headers of each MSS-sized segment it stands for. With loss, segments are
// sent one by one, so a lost frame is one lost packet.
//
// It prints "ready" once both devices exist (the caller then configures them), and exits at
// SIGTERM, SIGINT or SIGHUP; the TAP devices disappear with it. It runs at a real-time priority
// where it may, so busy ranks on the same cores do not hold frames back.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace {

// The header in front of every frame with IFF_VNET_HDR (virtio's struct virtio_net_hdr, whose
// Linux header does not compile as C++): offload state the two TAPs hand each other unchanged.
struct VnetHeader {
  uint8_t flags;
  uint8_t gsoType;   // 0: not a segmentation-offload frame
  uint16_t hdrLen;   // bytes of headers before the payload
  uint16_t gsoSize;  // payload bytes per segment
  uint16_t csumStart;
  uint16_t csumOffset;
};
static_assert(sizeof(VnetHeader) == 10);

volatile sig_atomic_t stopping = 0;
void onSignal(int) { stopping = 1; }

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "ferry-link-emulator: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

int64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Open TAP device `name` inside the network namespace at `nsPath` (/var/run/netns/NAME).
int openTap(const std::string& nsPath, const std::string& name, bool offload) {
  int ns = open(nsPath.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) die(("cannot open " + nsPath).c_str());
  if (setns(ns, CLONE_NEWNET) != 0) die(("cannot enter " + nsPath).c_str());
  close(ns);
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) die("cannot open /dev/net/tun");
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die(("cannot create TAP device " + name).c_str());
  if (offload) {
    int size = sizeof(VnetHeader);
    if (ioctl(fd, TUNSETVNETHDRSZ, &size) != 0) die("TUNSETVNETHDRSZ");
    unsigned flags = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
    if (ioctl(fd, TUNSETOFFLOAD, flags) != 0) die("TUNSETOFFLOAD");
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

struct Frame {
  int64_t releaseNs;
  std::vector<uint8_t> bytes;
};

// One direction of the link.
struct Direction {
  int in = -1, out = -1;
  int64_t delayNs = 0;
  double loss = 0;
  double nsPerByte = 0;    // 0: no rate limit
  int64_t wireFreeNs = 0;  // when the wire finishes sending what it was given
  size_t limit = 0;
  size_t queued = 0;
  std::deque<Frame> queue;
  uint64_t dropped = 0;
};

// Bytes a frame occupies on the wire: a TSO super-segment stands for several packets, each with
// the headers again, plus 24 bytes of Ethernet preamble, frame check and gap per packet.
double wireBytes(const uint8_t* frame, size_t len, bool offload) {
  size_t hdr = offload ? sizeof(VnetHeader) : 0;
  double payload = static_cast<double>(len - hdr);
  if (!offload) return payload + 24;
  VnetHeader vh{};
  std::memcpy(&vh, frame, sizeof(vh));
  if (vh.gsoType == 0 || vh.gsoSize == 0 || vh.hdrLen == 0 || vh.hdrLen > payload) return payload + 24;
  double body = payload - vh.hdrLen;
  double segments = std::max(1.0, std::ceil(body / vh.gsoSize));
  return body + segments * (vh.hdrLen + 24.0);
}

void usage() {
  std::fprintf(stderr,
               "usage: ferry-link-emulator --host-ns PATH --host-dev NAME --switch-ns PATH --switch-dev NAME\n"
               "                           [--rate-bps BPS] [--delay-us US] [--loss PCT] [--limit BYTES] [--seed N]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string hostNs, hostDev, switchNs, switchDev;
  double rate = 0, delayUs = 0, lossPct = 0;
  size_t limit = size_t{64} << 20;
  unsigned seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--host-ns") hostNs = v;
    else if (a == "--host-dev") hostDev = v;
    else if (a == "--switch-ns") switchNs = v;
    else if (a == "--switch-dev") switchDev = v;
    else if (a == "--rate-bps") rate = std::atof(v.c_str());
    else if (a == "--delay-us") delayUs = std::atof(v.c_str());
    else if (a == "--loss") lossPct = std::atof(v.c_str());
    else if (a == "--limit") limit = static_cast<size_t>(std::atoll(v.c_str()));
    else if (a == "--seed") seed = static_cast<unsigned>(std::atoi(v.c_str()));
    else usage();
  }
  if (hostNs.empty() || hostDev.empty() || switchNs.empty() || switchDev.empty() || rate < 0 || delayUs < 0 ||
      lossPct < 0 || lossPct > 100) {
    usage();
  }
  // Frames leave on time only if this process runs when they are due: the ranks it carries for may
  // spin on every core. A real-time priority lets it preempt them (it sleeps in ppoll otherwise;
  // the kernel's real-time throttling still keeps 5% of each second for everyone else).
  sched_param sp{};
  sp.sched_priority = 10;
  if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
    std::fprintf(stderr,
                 "ferry-link-emulator: no real-time priority (%s): delays will stretch when the CPUs are busy\n",
                 std::strerror(errno));
  }
  const bool offload = lossPct == 0;
  int hostFd = openTap(hostNs, hostDev, offload);
  int switchFd = openTap(switchNs, switchDev, offload);
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaction(s, &sa, nullptr);
  std::printf("ready\n");
  std::fflush(stdout);

  Direction up, down;  // host -> switch, switch -> host
  up.in = hostFd, up.out = switchFd, up.delayNs = static_cast<int64_t>(delayUs * 1000), up.loss = lossPct / 100;
  down.in = switchFd, down.out = hostFd;
  for (Direction* d : {&up, &down}) {
    d->nsPerByte = rate > 0 ? 8e9 / rate : 0;
    d->limit = limit;
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<uint8_t> buf(65536 + sizeof(VnetHeader) + 64);

  while (!stopping) {
    int64_t now = nowNs();
    // Deliver what is due.
    for (Direction* d : {&up, &down}) {
      while (!d->queue.empty() && d->queue.front().releaseNs <= now) {
        Frame& f = d->queue.front();
        ssize_t w = write(d->out, f.bytes.data(), f.bytes.size());
        (void)w;  // a frame the receiving stack refuses is lost, as on a wire
        d->queued -= f.bytes.size();
        d->queue.pop_front();
      }
    }
    // Sleep until a frame arrives or the next one is due.
    int64_t next = INT64_MAX;
    for (Direction* d : {&up, &down}) {
      if (!d->queue.empty()) next = std::min(next, d->queue.front().releaseNs);
    }
    pollfd fds[2] = {{up.in, POLLIN, 0}, {down.in, POLLIN, 0}};
    timespec wait{};
    timespec* waitp = nullptr;
    if (next != INT64_MAX) {
      int64_t dt = std::max<int64_t>(next - nowNs(), 0);
      wait.tv_sec = dt / 1000000000;
      wait.tv_nsec = dt % 1000000000;
      waitp = &wait;
    }
    int ready = ppoll(fds, 2, waitp, nullptr);
    if (ready < 0) {
      if (errno == EINTR) continue;
      die("ppoll");
    }
    for (int k = 0; k < 2; ++k) {
      if ((fds[k].revents & POLLIN) == 0) continue;
      Direction& d = k == 0 ? up : down;
      for (int burst = 0; burst < 64; ++burst) {
        ssize_t n = read(d.in, buf.data(), buf.size());
        if (n <= 0) break;
        const int64_t t = nowNs();
        if (d.loss > 0 && uniform(rng) < d.loss) continue;
        if (d.queued + static_cast<size_t>(n) > d.limit) {
          ++d.dropped;
          continue;
        }
        // The wire takes the frame when it has finished the previous one.
        const int64_t start = std::max(t, d.wireFreeNs);
        d.wireFreeNs =
            start + static_cast<int64_t>(wireBytes(buf.data(), static_cast<size_t>(n), offload) * d.nsPerByte);
        d.queue.push_back({d.wireFreeNs + d.delayNs, std::vector<uint8_t>(buf.begin(), buf.begin() + n)});
        d.queued += static_cast<size_t>(n);
      }
    }
  }
  if (up.dropped + down.dropped > 0) {
    std::fprintf(stderr, "ferry-link-emulator: %s: %llu frames dropped by full queues\n", hostDev.c_str(),
                 static_cast<unsigned long long>(up.dropped + down.dropped));
  }
  return 0;
}
