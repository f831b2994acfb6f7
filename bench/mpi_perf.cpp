// mpi-perf: ferry-perf's sweep over MPI's collectives, so that bench/compare can put ferry next to
// the MPI on the same machine. Same command line, sizes, formulas, check, table and JSON as
// ferry-perf: only the Backend differs.
//
//   mpirun -n 4 build/bench/mpi-perf all_reduce -b 8 -e 64M -f 4
//
// What each collective calls, with nccl-tests' buffer conventions:
//   all_reduce      MPI_Allreduce (in place: MPI_IN_PLACE)
//   reduce_scatter  MPI_Reduce_scatter_block (in place: MPI_IN_PLACE, which leaves rank r's block
//                   at the start of the buffer; it is then moved to offset r x count, where NCCL
//                   puts it, and that move is part of the measured time)
//   all_gather      MPI_Allgather (in place: MPI_IN_PLACE)
//   alltoall        MPI_Alltoall (in place: MPI_IN_PLACE)
//   broadcast       MPI_Bcast; out of place the root first copies send to recv
//   reduce          MPI_Reduce (in place on the root: MPI_IN_PLACE)
//   sendrecv        MPI_Sendrecv to rank+1 from rank-1 (in place: MPI_Sendrecv_replace)
// MPI has no float16, bfloat16 or avg: -d all and -o all skip them.
// Only MPI's C API: Open MPI's deprecated C++ bindings do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/perf/backend.hpp"
#include "bench/perf/host_info.hpp"
#include "bench/perf/options.hpp"
#include "bench/perf/sweep.hpp"

namespace {

using ferry::DataType;
using ferry::ErrorCode;
using ferry::RedOp;
using ferry::Status;
using ferry::perf::Call;
using ferry::perf::Coll;

Status mpiStatus(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status(ErrorCode::kSystemError, std::string(what) + " failed: " + text);
}

MPI_Datatype mpiType(DataType t) {
  switch (t) {
    case DataType::kInt8: return MPI_INT8_T;
    case DataType::kUint8: return MPI_UINT8_T;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kUint32: return MPI_UINT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kUint64: return MPI_UINT64_T;
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(RedOp op) {
  switch (op) {
    case RedOp::kSum: return MPI_SUM;
    case RedOp::kProd: return MPI_PROD;
    case RedOp::kMax: return MPI_MAX;
    case RedOp::kMin: return MPI_MIN;
    case RedOp::kBand: return MPI_BAND;
    case RedOp::kBor: return MPI_BOR;
    case RedOp::kBxor: return MPI_BXOR;
    default: return MPI_OP_NULL;
  }
}

size_t typeSize(DataType t) {
  int size = 0;
  MPI_Type_size(mpiType(t), &size);
  return static_cast<size_t>(size);
}

class MpiBackend final : public ferry::perf::Backend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    library_ = version;
    library_ = library_.substr(0, library_.find_first_of(",\n"));  // "Open MPI v4.1.4", "MPICH Version:\t4.0.2"
    if (library_.rfind("MPICH Version:", 0) == 0) {
      const size_t v = library_.find_first_not_of(" \t", 14);
      library_ = "MPICH " + (v == std::string::npos ? std::string("?") : library_.substr(v));
    } else if (const size_t v = library_.find(" v"); v != std::string::npos) {
      library_.erase(v + 1, 1);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string library() const override { return library_; }
  bool supports(Coll coll, DataType type, RedOp op) const override {
    if (mpiType(type) == MPI_DATATYPE_NULL) return false;
    return !ferry::perf::collInfo(coll).reduces || mpiOp(op) != MPI_OP_NULL;
  }

  Status run(const Call& c) override {
    if (!supports(c.coll, c.type, c.op)) return Status(ErrorCode::kInvalidArgument, "MPI has no such type or op");
    if (c.count > static_cast<size_t>(INT_MAX)) {
      return Status(ErrorCode::kInvalidArgument, "count " + std::to_string(c.count) + " exceeds MPI's int counts");
    }
    const int count = static_cast<int>(c.count);
    const MPI_Datatype dt = mpiType(c.type);
    const size_t bytes = c.count * typeSize(c.type);
    const bool inPlace = c.send == c.recv;
    auto* recv = static_cast<char*>(c.recv);
    switch (c.coll) {
      case Coll::kAllReduce:
        return mpiStatus(MPI_Allreduce(inPlace ? MPI_IN_PLACE : c.send, c.recv, count, dt, mpiOp(c.op), MPI_COMM_WORLD),
                         "MPI_Allreduce");
      case Coll::kReduceScatter: {
        if (recv != static_cast<const char*>(c.send) + rank_ * bytes) {
          return mpiStatus(MPI_Reduce_scatter_block(c.send, c.recv, count, dt, mpiOp(c.op), MPI_COMM_WORLD),
                           "MPI_Reduce_scatter_block");
        }
        char* base = recv - rank_ * bytes;
        const int rc = MPI_Reduce_scatter_block(MPI_IN_PLACE, base, count, dt, mpiOp(c.op), MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS && rank_ > 0) std::memmove(recv, base, bytes);
        return mpiStatus(rc, "MPI_Reduce_scatter_block");
      }
      case Coll::kAllGather: {
        const bool aliased = c.send == recv + rank_ * bytes;
        return mpiStatus(aliased ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.recv, count, dt, MPI_COMM_WORLD)
                                 : MPI_Allgather(c.send, count, dt, c.recv, count, dt, MPI_COMM_WORLD),
                         "MPI_Allgather");
      }
      case Coll::kAllToAll:
        return mpiStatus(inPlace ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.recv, count, dt, MPI_COMM_WORLD)
                                 : MPI_Alltoall(c.send, count, dt, c.recv, count, dt, MPI_COMM_WORLD),
                         "MPI_Alltoall");
      case Coll::kBroadcast:
        if (rank_ == c.root && !inPlace) std::memcpy(c.recv, c.send, bytes);
        return mpiStatus(MPI_Bcast(c.recv, count, dt, c.root, MPI_COMM_WORLD), "MPI_Bcast");
      case Coll::kReduce:
        return mpiStatus(MPI_Reduce(inPlace && rank_ == c.root ? MPI_IN_PLACE : c.send, c.recv, count, dt, mpiOp(c.op),
                                    c.root, MPI_COMM_WORLD),
                         "MPI_Reduce");
      case Coll::kSend: {
        const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
        if (inPlace) {
          return mpiStatus(MPI_Sendrecv_replace(c.recv, count, dt, next, 0, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                           "MPI_Sendrecv_replace");
        }
        return mpiStatus(MPI_Sendrecv(c.send, count, dt, next, 0, c.recv, count, dt, prev, 0, MPI_COMM_WORLD,
                                      MPI_STATUS_IGNORE),
                         "MPI_Sendrecv");
      }
      // The sweep names send/recv pairs kSend and never times a bare barrier or receive.
      case Coll::kBarrier:
      case Coll::kRecv: break;
    }
    return Status(ErrorCode::kInternalError, "unknown collective");
  }

  Status barrier() override { return mpiStatus(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  Status allReduceDoubles(double* values, size_t count, RedOp op) override {
    return mpiStatus(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_DOUBLE, mpiOp(op),
                                   MPI_COMM_WORLD),
                     "MPI_Allreduce");
  }

  Status allGatherBytes(const void* in, void* out, size_t bytes) override {
    const int n = static_cast<int>(bytes);
    return mpiStatus(MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
  }

  void abort(const std::string& reason) override {
    std::fprintf(stderr, "mpi-perf: rank %d: %s\n", rank_, reason.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);  // MPI cannot interrupt a blocked collective any other way
  }

  void* allocRegistered(size_t bytes) override {
    void* p = nullptr;
    if (MPI_Alloc_mem(static_cast<MPI_Aint>(bytes), MPI_INFO_NULL, &p) != MPI_SUCCESS) return nullptr;
    return p;
  }
  void freeRegistered(void* p) override { MPI_Free_mem(p); }

 private:
  int rank_ = 0;
  int size_ = 1;
  std::string library_;
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t residentBeforeInit = ferry::perf::residentBytes();
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::vector<std::string> args(argv, argv + argc);
  auto options = ferry::perf::parseOptions(std::vector<std::string>(args.begin() + 1, args.end()));
  int status = 0;
  if (!options.isOk()) {
    if (rank == 0) {
      std::fprintf(stderr, "mpi-perf: %s\n%s", options.status().message().c_str(),
                   ferry::perf::usage("mpi-perf").c_str());
    }
    status = 2;
  } else if (options->help) {
    if (rank == 0) std::printf("%s", ferry::perf::usage("mpi-perf").c_str());
  } else {
    MpiBackend backend;
    status = ferry::perf::runSweep(*options, backend, args, residentBeforeInit, "mpi-perf");
  }
  MPI_Finalize();
  return status;
}
