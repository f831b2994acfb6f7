// Host side of the device communicator: the resource layout, its size and buildDevComm.
#include <stdexcept>

#include "collectives/cuda/dev_comm.hpp"

namespace ferry::gpu {
namespace {

constexpr size_t kAlign = 256;
size_t alignUp(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

}  // namespace

DevLayout makeDevLayout(const DevConfig& config) {
  DevLayout l;
  l.nRanks = config.nRanks;
  l.slots = config.slots < 1 ? 1 : config.slots;
  l.llSlots = config.llSlots < 1 ? 1 : config.llSlots;
  // Slots are whole 16-byte lines (vector copies) and LL payloads whole 8-byte packs.
  l.slotBytes = (config.slotBytes < 16 ? 16 : config.slotBytes) / 16 * 16;
  l.llSlotBytes = (config.llSlotBytes < 16 ? 16 : config.llSlotBytes) / 16 * 16;
  const size_t n = static_cast<size_t>(config.nRanks);
  l.connOffset = sizeof(DirectSlot);
  l.scratchOffset = alignUp(l.connOffset + n * sizeof(ConnCtrl));
  l.fifoOffset = alignUp(l.scratchOffset + l.slotBytes);
  l.fifoBytes = alignUp(static_cast<size_t>(l.slots) * l.slotBytes);
  l.llOffset = l.fifoOffset + n * l.fifoBytes;
  l.llBytes = alignUp(static_cast<size_t>(l.llSlots) * 2 * l.llSlotBytes);
  l.channelBytes = alignUp(l.llOffset + n * l.llBytes);
  return l;
}

size_t rankResourceBytes(const DevConfig& config) {
  return makeDevLayout(config).channelBytes * static_cast<size_t>(config.nChannels < 1 ? 1 : config.nChannels);
}

const char* devWaitName(DevWait w) {
  switch (w) {
    case DevWait::kHead: return "the sender's post of the step (simple protocol head)";
    case DevWait::kTail: return "the receiver's release of a FIFO slot (simple protocol tail)";
    case DevWait::kLLTail: return "the receiver's release of an LL slot (LL tail)";
    case DevWait::kLLFlag: return "the sender's LL words of the step (LL flag)";
    case DevWait::kDirectSeq: return "the peer's buffer pointers of the work (direct seq)";
    case DevWait::kDirectDone: return "the peer's end of the work (direct done)";
    default: return "nothing";
  }
}

void buildDevComm(const DevConfig& config, int rank, const std::vector<void*>& rankBases, DevError* error,
                  DevComm* out) {
  if (config.nRanks < 1 || config.nRanks > kMaxDevRanks || config.nChannels < 1 || config.nChannels > kMaxChannels ||
      rank < 0 || rank >= config.nRanks || rankBases.size() != static_cast<size_t>(config.nRanks)) {
    throw std::invalid_argument("buildDevComm: ranks, channels or bases out of range");
  }
  DevComm comm;
  comm.rank = rank;
  comm.nRanks = config.nRanks;
  comm.nChannels = config.nChannels;
  comm.layout = makeDevLayout(config);
  comm.oneDevice = config.oneDevice ? 1 : 0;
  comm.timeoutNs = config.timeoutNs;
  comm.error = error;
  for (int r = 0; r < config.nRanks; ++r) comm.bases[r] = static_cast<uint8_t*>(rankBases[r]);
  *out = comm;
}

size_t devCommBytes() { return sizeof(DevComm); }

}  // namespace ferry::gpu
