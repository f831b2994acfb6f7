// The collectives of ferry.Comm on numpy arrays and torch tensors.
//
// Each method borrows its arrays (buffer.hpp), checks what the C++ API cannot see (element types
// agree, sizes match the communicator, outputs are writable, in-place layouts are exact), then
// calls Comm with the GIL released, or queues the call with async_op=True. The arrays are never
// copied: the result lands in the array passed, which the method also returns.
//
// In place: all_reduce, all_to_all, broadcast and reduce work in place when recv is None (or is
// send). reduce_scatter(send) leaves this rank's block in its slot of send and returns a view of
// it; all_gather(None, recv) takes this rank's input from its slot of recv.
#include <string>
#include <utility>

#include "comm.hpp"
#include "errors.hpp"

namespace ferry::bindings {
namespace py = pybind11;
namespace {

// "'sum', 'prod', ...": every op's name, from the op table.
std::string opNames() {
  std::string s;
  for (int i = 0; i < kNumRedOps; ++i) {
    s += (i == 0 ? "'" : ", '") + std::string(redOpName(static_cast<RedOp>(i))) + "'";
  }
  return s;
}

// `op` as a ferry.RedOp or its name ("sum"); anything else names the argument in the error.
RedOp parseOp(py::handle op, const ArgRef& arg) {
  if (py::isinstance<RedOp>(op)) return op.cast<RedOp>();
  if (py::isinstance<py::str>(op)) {
    std::string s = op.cast<std::string>();
    for (int i = 0; i < kNumRedOps; ++i) {
      if (s == redOpName(static_cast<RedOp>(i))) return static_cast<RedOp>(i);
    }
    raiseArg(arg, "is '" + s + "'; expected one of " + opNames() + " or a ferry.RedOp");
  }
  throw py::type_error(arg.message("is a " + std::string(py::str(py::type::handle_of(op).attr("__name__"))) +
                                   "; expected a string (" + opNames() + ") or a ferry.RedOp"));
}

// The C++ API takes one DataType per call, so both arrays must hold it.
void checkSameType(const HostBuffer& b, const ArgRef& arg, const HostBuffer& ref, const char* refName) {
  if (b.type() != ref.type()) {
    raiseArg(arg, "has dtype " + std::string(dataTypeName(b.type())) + "; expected " + dataTypeName(ref.type()) +
                      ", the dtype of '" + refName + "'");
  }
}

void checkCount(const HostBuffer& b, const ArgRef& arg, size_t expected, const std::string& why) {
  if (b.count() != expected) {
    raiseArg(arg,
             "has " + std::to_string(b.count()) + " elements; expected " + std::to_string(expected) + " (" + why + ")");
  }
}

// `count` must split into `size` equal blocks.
size_t blockOf(const HostBuffer& b, const ArgRef& arg, int size, const char* block) {
  if (b.count() % static_cast<size_t>(size) != 0) {
    raiseArg(arg, "has " + std::to_string(b.count()) + " elements; expected a multiple of the communicator size " +
                      std::to_string(size) + " (" + block + ")");
  }
  return b.count() / static_cast<size_t>(size);
}

// recv may coincide with send only in the exact in-place layout (recv at `inPlaceRecv`, send at
// `inPlaceSend`); any other overlap would let the collective read what it already wrote.
void checkOverlap(const HostBuffer& send, const HostBuffer& recv, const ArgRef& recvArg, const void* inPlaceSend,
                  const void* inPlaceRecv, const char* inPlaceHow) {
  auto* s = static_cast<const char*>(send.data());
  auto* r = static_cast<const char*>(recv.data());
  bool overlap = send.bytes() > 0 && recv.bytes() > 0 && s < r + recv.bytes() && r < s + send.bytes();
  if (overlap && !(s == inPlaceSend && r == inPlaceRecv)) {
    raiseArg(recvArg,
             std::string("overlaps 'send' without being in place; expected separate arrays, or ") + inPlaceHow);
  }
}

// A view of elements [start, start + count) of a contiguous array (its reshape(-1) sliced).
py::object slotView(py::handle obj, const ArgRef& arg, size_t start, size_t count) {
  if (!py::hasattr(obj, "reshape")) {
    raiseArg(arg,
             "has no reshape() to make the in-place view of this rank's block; pass the output array "
             "explicitly");
  }
  py::object flat = obj.attr("reshape")(-1);
  return flat[py::slice(static_cast<py::ssize_t>(start), static_cast<py::ssize_t>(start + count), 1)];
}

// The buffers a call borrowed, handed to runOp (dropped after the call, or kept by the Work).
std::vector<HostBuffer> keep(HostBuffer a) {
  std::vector<HostBuffer> v;
  v.push_back(std::move(a));
  return v;
}

std::vector<HostBuffer> keep(HostBuffer a, HostBuffer b) {
  std::vector<HostBuffer> v;
  v.push_back(std::move(a));
  v.push_back(std::move(b));
  return v;
}

// The out-of-place form of the calls whose output has the input's count (all_reduce, reduce on
// the root): send read-only, recv written, of the same type and count, not overlapping.
struct OutOfPlace {
  HostBuffer send;
  HostBuffer recv;
};
OutOfPlace borrowOutOfPlace(py::handle send, const ArgRef& sendArg, py::handle recv, const ArgRef& recvArg) {
  OutOfPlace io{HostBuffer::borrow(send, sendArg, false), HostBuffer::borrow(recv, recvArg, true)};
  checkSameType(io.recv, recvArg, io.send, "send");
  checkCount(io.recv, recvArg, io.send.count(), "the element count of 'send'");
  checkOverlap(io.send, io.recv, recvArg, io.send.data(), io.send.data(), "recv=None for in place");
  return io;
}

// Each collective below: the in-place form first (one buffer, written), then the out-of-place
// form (send read-only, recv written, checked against send). The lambdas capture raw pointers and
// counts only; the HostBuffers that own the memory travel separately to runOp.
py::object allReduce(PyComm& self, py::object send, py::object recv, py::object opObj, bool asyncOp) {
  const char* fn = "all_reduce";
  auto c = self.get(fn);
  ArgRef sendArg{fn, "send", c->rank()}, recvArg{fn, "recv", c->rank()};
  RedOp op = parseOp(opObj, {fn, "op", c->rank()});
  if (recv.is_none() || recv.is(send)) {
    HostBuffer b = HostBuffer::borrow(send, sendArg, true);
    void* p = b.data();
    size_t n = b.count();
    DataType t = b.type();
    return runOp(c, asyncOp, keep(std::move(b)), py::reinterpret_borrow<py::object>(send),
                 [=](Comm& comm) { return comm.allReduce(p, p, n, t, op); });
  }
  OutOfPlace io = borrowOutOfPlace(send, sendArg, recv, recvArg);
  const void* sp = io.send.data();
  void* rp = io.recv.data();
  size_t n = io.send.count();
  DataType t = io.send.type();
  return runOp(c, asyncOp, keep(std::move(io.send), std::move(io.recv)), py::reinterpret_borrow<py::object>(recv),
               [=](Comm& comm) { return comm.allReduce(sp, rp, n, t, op); });
}

// In place (recv None) the C++ API wants recv == send + rank * n: this rank's block of send.
py::object reduceScatter(PyComm& self, py::object send, py::object recv, py::object opObj, bool asyncOp) {
  const char* fn = "reduce_scatter";
  auto c = self.get(fn);
  const int rank = c->rank(), size = c->size();
  ArgRef sendArg{fn, "send", rank}, recvArg{fn, "recv", rank};
  RedOp op = parseOp(opObj, {fn, "op", rank});
  if (recv.is_none()) {
    HostBuffer s = HostBuffer::borrow(send, sendArg, true);
    size_t n = blockOf(s, sendArg, size, "one block per rank");
    void* sp = s.data();
    void* rp = s.at(rank * n);
    DataType t = s.type();
    py::object view = slotView(send, sendArg, rank * n, n);
    return runOp(c, asyncOp, keep(std::move(s)), std::move(view),
                 [=](Comm& comm) { return comm.reduceScatter(sp, rp, n, t, op); });
  }
  HostBuffer s = HostBuffer::borrow(send, sendArg, false);
  HostBuffer r = HostBuffer::borrow(recv, recvArg, true);
  checkSameType(r, recvArg, s, "send");
  size_t n = r.count();
  checkCount(s, sendArg, n * size,
             "the communicator size " + std::to_string(size) + " x the " + std::to_string(n) + " elements of 'recv'");
  checkOverlap(s, r, recvArg, s.data(), s.at(rank * n), "recv=None for in place");
  const void* sp = s.data();
  void* rp = r.data();
  DataType t = s.type();
  return runOp(c, asyncOp, keep(std::move(s), std::move(r)), py::reinterpret_borrow<py::object>(recv),
               [=](Comm& comm) { return comm.reduceScatter(sp, rp, n, t, op); });
}

// In place (send None) the C++ API wants send == recv + rank * n: this rank's block of recv.
py::object allGather(PyComm& self, py::object send, py::object recv, bool asyncOp) {
  const char* fn = "all_gather";
  auto c = self.get(fn);
  const int rank = c->rank(), size = c->size();
  ArgRef sendArg{fn, "send", rank}, recvArg{fn, "recv", rank};
  if (recv.is_none()) {
    raiseArg(recvArg,
             "is None; expected the output array of size x the elements of 'send' (pass send=None to "
             "gather in place from this rank's block of recv)");
  }
  HostBuffer r = HostBuffer::borrow(recv, recvArg, true);
  if (send.is_none()) {
    size_t n = blockOf(r, recvArg, size, "one block per rank");
    const void* sp = r.at(rank * n);
    void* rp = r.data();
    DataType t = r.type();
    return runOp(c, asyncOp, keep(std::move(r)), py::reinterpret_borrow<py::object>(recv),
                 [=](Comm& comm) { return comm.allGather(sp, rp, n, t); });
  }
  HostBuffer s = HostBuffer::borrow(send, sendArg, false);
  checkSameType(r, recvArg, s, "send");
  size_t n = s.count();
  checkCount(r, recvArg, n * size,
             "the communicator size " + std::to_string(size) + " x the " + std::to_string(n) + " elements of 'send'");
  checkOverlap(s, r, recvArg, r.at(rank * n), r.data(), "send=None for in place");
  const void* sp = s.data();
  void* rp = r.data();
  DataType t = s.type();
  return runOp(c, asyncOp, keep(std::move(s), std::move(r)), py::reinterpret_borrow<py::object>(recv),
               [=](Comm& comm) { return comm.allGather(sp, rp, n, t); });
}

py::object allToAll(PyComm& self, py::object send, py::object recv, bool asyncOp) {
  const char* fn = "all_to_all";
  auto c = self.get(fn);
  const int rank = c->rank(), size = c->size();
  ArgRef sendArg{fn, "send", rank}, recvArg{fn, "recv", rank};
  if (recv.is_none() || recv.is(send)) {
    HostBuffer b = HostBuffer::borrow(send, sendArg, true);
    size_t n = blockOf(b, sendArg, size, "one block per rank");
    void* p = b.data();
    DataType t = b.type();
    return runOp(c, asyncOp, keep(std::move(b)), py::reinterpret_borrow<py::object>(send),
                 [=](Comm& comm) { return comm.allToAll(p, p, n, t); });
  }
  HostBuffer s = HostBuffer::borrow(send, sendArg, false);
  HostBuffer r = HostBuffer::borrow(recv, recvArg, true);
  checkSameType(r, recvArg, s, "send");
  size_t n = blockOf(s, sendArg, size, "one block per rank");
  checkCount(r, recvArg, s.count(), "the element count of 'send'");
  checkOverlap(s, r, recvArg, s.data(), s.data(), "recv=None for in place");
  const void* sp = s.data();
  void* rp = r.data();
  DataType t = s.type();
  return runOp(c, asyncOp, keep(std::move(s), std::move(r)), py::reinterpret_borrow<py::object>(recv),
               [=](Comm& comm) { return comm.allToAll(sp, rp, n, t); });
}

// A root out of range is left to the C++ API, which checks it before any communication.
py::object broadcast(PyComm& self, py::object buf, int root, py::object recv, bool asyncOp) {
  const char* fn = "broadcast";
  auto c = self.get(fn);
  const int rank = c->rank();
  ArgRef bufArg{fn, "buf", rank}, recvArg{fn, "recv", rank};
  if (recv.is_none() || recv.is(buf)) {
    HostBuffer b = HostBuffer::borrow(buf, bufArg, true);
    void* p = b.data();
    size_t n = b.count();
    DataType t = b.type();
    return runOp(c, asyncOp, keep(std::move(b)), py::reinterpret_borrow<py::object>(buf),
                 [=](Comm& comm) { return comm.broadcast(p, p, n, t, root); });
  }
  HostBuffer r = HostBuffer::borrow(recv, recvArg, true);
  void* rp = r.data();
  size_t n = r.count();
  DataType t = r.type();
  py::object result = py::reinterpret_borrow<py::object>(recv);
  if (rank != root) {  // buf is read on the root only, as in the C++ API
    return runOp(c, asyncOp, keep(std::move(r)), std::move(result),
                 [=](Comm& comm) { return comm.broadcast(nullptr, rp, n, t, root); });
  }
  HostBuffer s = HostBuffer::borrow(buf, bufArg, false);
  checkSameType(r, recvArg, s, "buf");
  checkCount(r, recvArg, s.count(), "the element count of 'buf' on the root");
  checkOverlap(s, r, recvArg, s.data(), s.data(), "recv=None for in place");
  const void* sp = s.data();
  return runOp(c, asyncOp, keep(std::move(s), std::move(r)), std::move(result),
               [=](Comm& comm) { return comm.broadcast(sp, rp, n, t, root); });
}

py::object reduce(PyComm& self, py::object send, py::object recv, py::object opObj, int root, bool asyncOp) {
  const char* fn = "reduce";
  auto c = self.get(fn);
  const int rank = c->rank();
  ArgRef sendArg{fn, "send", rank}, recvArg{fn, "recv", rank};
  RedOp op = parseOp(opObj, {fn, "op", rank});
  const bool isRoot = rank == root;
  if (recv.is_none() || recv.is(send) || !isRoot) {  // recv is written on the root only
    HostBuffer s = HostBuffer::borrow(send, sendArg, isRoot);
    void* sp = s.data();
    void* rp = isRoot ? sp : nullptr;
    size_t n = s.count();
    DataType t = s.type();
    py::object result = py::reinterpret_borrow<py::object>(recv.is_none() ? send : recv);
    return runOp(c, asyncOp, keep(std::move(s)), std::move(result),
                 [=](Comm& comm) { return comm.reduce(sp, rp, n, t, op, root); });
  }
  OutOfPlace io = borrowOutOfPlace(send, sendArg, recv, recvArg);
  const void* sp = io.send.data();
  void* rp = io.recv.data();
  size_t n = io.send.count();
  DataType t = io.send.type();
  return runOp(c, asyncOp, keep(std::move(io.send), std::move(io.recv)), py::reinterpret_borrow<py::object>(recv),
               [=](Comm& comm) { return comm.reduce(sp, rp, n, t, op, root); });
}

py::object send(PyComm& self, py::object buf, int peer, bool asyncOp) {
  auto c = self.get("send");
  HostBuffer b = HostBuffer::borrow(buf, {"send", "buf", c->rank()}, false);
  const void* p = b.data();
  size_t n = b.count();
  DataType t = b.type();
  return runOp(c, asyncOp, keep(std::move(b)), py::none(), [=](Comm& comm) { return comm.send(p, n, t, peer); });
}

py::object recv(PyComm& self, py::object buf, int peer, bool asyncOp) {
  auto c = self.get("recv");
  HostBuffer b = HostBuffer::borrow(buf, {"recv", "buf", c->rank()}, true);
  void* p = b.data();
  size_t n = b.count();
  DataType t = b.type();
  return runOp(c, asyncOp, keep(std::move(b)), py::reinterpret_borrow<py::object>(buf),
               [=](Comm& comm) { return comm.recv(p, n, t, peer); });
}

// sends and recvs are sequences of (array, peer) pairs, posted together.
py::object sendRecv(PyComm& self, py::sequence sends, py::sequence recvs, bool asyncOp) {
  const char* fn = "send_recv";
  auto c = self.get(fn);
  std::vector<HostBuffer> buffers;
  std::vector<P2pOp> ops;
  auto add = [&](py::sequence list, const char* listName, bool isSend) {
    for (size_t i = 0; i < list.size(); ++i) {
      ArgRef arg{fn, std::string(listName) + "[" + std::to_string(i) + "]", c->rank()};
      py::object item = list[i];
      if (!py::isinstance<py::sequence>(item) || py::len(item) != 2) {
        throw py::type_error(arg.message("is not an (array, peer) pair"));
      }
      py::sequence pair = item;
      py::object buf = pair[0];
      int peer = py::cast<int>(pair[1]);
      HostBuffer b = HostBuffer::borrow(buf, arg, !isSend);
      ops.push_back(isSend ? P2pOp::send(b.data(), b.count(), b.type(), peer)
                           : P2pOp::recv(b.data(), b.count(), b.type(), peer));
      buffers.push_back(std::move(b));
    }
  };
  add(sends, "sends", true);
  add(recvs, "recvs", false);
  return runOp(c, asyncOp, std::move(buffers), py::none(), [ops](Comm& comm) { return comm.sendRecv(ops); });
}

// Moves no data: nothing to borrow.
py::object barrier(PyComm& self, bool asyncOp) {
  return runOp(self.get("barrier"), asyncOp, {}, py::none(), [](Comm& comm) { return comm.barrier(); });
}

}  // namespace

void registerCollectives(py::class_<PyComm>& cls) {
  using py::arg;
  auto asyncArg = [] { return py::arg("async_op") = false; };
  cls.def("all_reduce", &allReduce, arg("send"), arg("recv") = py::none(), arg("op") = "sum", py::kw_only(), asyncArg(),
          "recv[i] = op over ranks of send[i]; in place on send when recv is None. Returns the output array.")
      .def("reduce_scatter", &reduceScatter, arg("send"), arg("recv") = py::none(), arg("op") = "sum", py::kw_only(),
           asyncArg(),
           "recv[i] = op over ranks of send[rank * n + i], where send holds size blocks of n = len(recv) elements. "
           "With recv None, in place: the block lands in this rank's slot of send, and the call returns a view of it.")
      .def("all_gather", &allGather, arg("send"), arg("recv"), py::kw_only(), asyncArg(),
           "recv[r * n + i] = rank r's send[i], where recv holds size x n elements. With send None, in place: each "
           "rank's input is its own block of recv. Returns recv.")
      .def("all_to_all", &allToAll, arg("send"), arg("recv") = py::none(), py::kw_only(), asyncArg(),
           "Block r of recv = rank r's block `rank` of send (size equal blocks); in place on send when recv is None. "
           "Returns the output array.")
      .def("broadcast", &broadcast, arg("buf"), arg("root") = 0, arg("recv") = py::none(), py::kw_only(), asyncArg(),
           "Every rank gets root's buf: in place in buf, or into recv when given (then buf is read on the root "
           "only and may be None elsewhere). Returns the output array.")
      .def("reduce", &reduce, arg("send"), arg("recv") = py::none(), arg("op") = "sum", arg("root") = 0, py::kw_only(),
           asyncArg(),
           "On root, recv[i] = op over ranks of send[i] (in place on send when recv is None). Other ranks only "
           "contribute; their recv is ignored. Returns recv, or send when recv is None.")
      .def("send", &send, arg("buf"), arg("peer"), py::kw_only(), asyncArg(),
           "Send buf to `peer`, which calls recv with the same element count and dtype.")
      .def("recv", &recv, arg("buf"), arg("peer"), py::kw_only(), asyncArg(),
           "Receive into buf from `peer`, which calls send with the same element count and dtype. Returns buf.")
      .def("send_recv", &sendRecv, arg("sends") = py::list(), arg("recvs") = py::list(), py::kw_only(), asyncArg(),
           "Post every send (array, peer) and receive (array, peer) at once, then wait for all: matching transfers "
           "complete whatever order each rank lists them in. Transfers between two ranks pair in order.")
      .def("barrier", &barrier, py::kw_only(), asyncArg(), "Return once every rank has entered the barrier.");
}

}  // namespace ferry::bindings
