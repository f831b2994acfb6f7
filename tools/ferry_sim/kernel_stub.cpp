// The host kernels for recording (recorder.hpp): each call is noted with its output bytes and
// computes nothing. ferry-sim links this file in place of kernels/host/reduce.cpp and copy.cpp,
// defining every function they define, so the linker takes none of theirs.
#include "kernels/host/copy.hpp"
#include "kernels/host/reduce.hpp"
#include "tools/ferry_sim/recorder.hpp"

namespace ferry::kernels {

void reduce(DataType type, RedOp, void*, const void*, const void*, size_t count) {
  sim::noteCompute(sim::Op::Kind::kReduce, count * dataTypeSize(type));
}

void sumDivide(DataType type, void*, const void*, const void*, size_t count, uint32_t) {
  sim::noteCompute(sim::Op::Kind::kReduce, count * dataTypeSize(type));
}

void divide(DataType type, void*, const void*, size_t count, uint32_t) {
  sim::noteCompute(sim::Op::Kind::kReduce, count * dataTypeSize(type));
}

void copyStreaming(void*, const void*, size_t bytes) { sim::noteCompute(sim::Op::Kind::kCopy, bytes); }

Isa activeIsa() { return Isa::kBaseline; }
const char* isaName(Isa) { return "recording"; }
bool isaSupported(Isa isa) { return isa == Isa::kBaseline; }
bool setIsa(Isa isa) { return isa == Isa::kBaseline; }

}  // namespace ferry::kernels
