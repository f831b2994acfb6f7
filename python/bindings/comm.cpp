#include "comm.hpp"

#include <cstdio>
#include <cstring>

#include <pybind11/stl.h>

#include "errors.hpp"
#include "work.hpp"

namespace ferry::bindings {
namespace py = pybind11;
namespace {

// A communicator that Comm::create / fromEnv made, or their error raised.
PyComm created(Result<std::unique_ptr<Comm>> result) { return PyComm(unwrap(std::move(result))); }

std::string hexId(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

// UniqueId travels between processes as hex (an environment variable), bytes or a pickle.
void registerUniqueId(py::module_& m) {
  py::class_<UniqueId>(m, "UniqueId",
                       "The rendezvous of one job (ncclUniqueId): where the root listens and the job secret. One "
                       "rank creates it, passes hex() to the others any way it likes, and every rank calls "
                       "Comm.create(uid, rank, size).")
      .def_static(
          "create", [] { return unwrap(UniqueId::create()); },
          "Start a rendezvous root in this process (on FERRY_SOCKET_IFNAME's address, else loopback) and "
          "describe it, with a fresh random secret.")
      .def_static(
          "from_hex", [](const std::string& hex) { return unwrap(UniqueId::fromHex(hex)); }, py::arg("hex"),
          "The UniqueId that hex() printed (256 hex digits).")
      .def_static(
          "from_bytes",
          [](const py::bytes& b) {
            std::string s = b;
            UniqueId id;
            if (s.size() != sizeof(id.bytes)) {
              raiseInvalid("UniqueId.from_bytes: argument 'data' has " + std::to_string(s.size()) +
                           " bytes; expected " + std::to_string(sizeof(id.bytes)));
            }
            std::memcpy(id.bytes, s.data(), sizeof(id.bytes));
            return id;
          },
          py::arg("data"), "The UniqueId whose bytes() these are (128 bytes).")
      .def("hex", &UniqueId::toHex, "256 hex digits, for an environment variable or a file.")
      .def("__bytes__",
           [](const UniqueId& id) { return py::bytes(reinterpret_cast<const char*>(id.bytes), sizeof(id.bytes)); })
      .def("__eq__",
           [](const UniqueId& a, const UniqueId& b) { return std::memcmp(a.bytes, b.bytes, sizeof(a.bytes)) == 0; })
      .def("__hash__", [](const UniqueId& id) { return py::hash(py::str(id.toHex())); })
      .def("__repr__", [](const UniqueId& id) { return "ferry.UniqueId.from_hex('" + id.toHex() + "')"; })
      .def(py::pickle([](const UniqueId& id) { return id.toHex(); },
                      [](const std::string& hex) { return unwrap(UniqueId::fromHex(hex)); }));
}

}  // namespace

PyComm::PyComm(std::unique_ptr<Comm> comm) : comm_(std::move(comm)) {}

std::shared_ptr<Comm> PyComm::get(const char* fn) const {
  if (!comm_) raise(Status(ErrorCode::kInvalidUsage, std::string(fn) + ": the communicator is closed"));
  return comm_;
}

void PyComm::close() {
  std::shared_ptr<Comm> last = std::move(comm_);
  // Destroying a communicator waits for the operation its progress thread runs: not under the GIL.
  py::gil_scoped_release unlocked;
  last.reset();
}

// The one place where bindings call into a communicator's collectives. The sync path holds `comm`
// (a shared_ptr copy) and `buffers` across the call, so neither close() nor the caller's other
// threads can free what ferry is using; both are released with the GIL held again.
py::object runOp(const std::shared_ptr<Comm>& comm, bool asyncOp, std::vector<HostBuffer> buffers, py::object result,
                 std::function<Status(Comm&)> op) {
  if (asyncOp) {
    std::shared_ptr<Work> work;
    {
      py::gil_scoped_release unlocked;
      work = comm->enqueue(std::move(op));
    }
    return py::cast(new PyWork(std::move(work), std::move(buffers), std::move(result)),
                    py::return_value_policy::take_ownership);
  }
  Status st;
  {
    py::gil_scoped_release unlocked;
    st = op(*comm);
  }
  check(st);
  return result;
}

void registerComm(py::module_& m) {
  registerUniqueId(m);
  m.attr("SPLIT_NOCOLOR") = kSplitNoColor;

  // Every call that can block (rendezvous, split, abort, close, collectives) releases the GIL.
  py::class_<PyComm> cls(m, "Comm",
                         "One rank's handle on a group of ranks. Every collective is called by every rank with "
                         "matching arguments and returns when this rank's part is done. Close it with close() or "
                         "a with-block.");
  cls.def_static(
         "from_env",
         [] {
           Result<std::unique_ptr<Comm>> r = Status();
           {
             py::gil_scoped_release unlocked;
             r = Comm::fromEnv();
           }
           return created(std::move(r));
         },
         "Join from the environment: rank and size from ferryrun, torchrun, Open MPI, PMI or Slurm; the rendezvous at "
         "FERRY_ADDR (or MASTER_ADDR:MASTER_PORT), where rank 0 listens. Blocks until every rank joined or "
         "FERRY_TIMEOUT "
         "passed.")
      .def_static(
          "create",
          [](const UniqueId& id, int rank, int size) {
            Result<std::unique_ptr<Comm>> r = Status();
            {
              py::gil_scoped_release unlocked;
              r = Comm::create(id, rank, size);
            }
            return created(std::move(r));
          },
          py::arg("uid"), py::arg("rank"), py::arg("size"),
          "Join the job `uid` as `rank` of `size` ranks. Blocks until every rank joined or FERRY_TIMEOUT "
          "passed.")
      .def(
          "split",
          [](PyComm& self, int color, py::object key) -> py::object {
            auto c = self.get("split");
            int k = key.is_none() ? c->rank() : key.cast<int>();
            Result<std::unique_ptr<Comm>> r = Status();
            {
              py::gil_scoped_release unlocked;
              r = c->split(color, k);
            }
            std::unique_ptr<Comm> sub = unwrap(std::move(r));
            if (!sub) return py::none();
            return py::cast(PyComm(std::move(sub)));
          },
          py::arg("color"), py::arg("key") = py::none(),
          "Collective: ranks passing the same color form a new communicator, ordered by key (default: this rank) "
          "then by rank. Ranks passing ferry.SPLIT_NOCOLOR (-1) get None.")
      .def(
          "shrink",
          [](PyComm& self, std::vector<int> exclude) -> py::object {
            auto c = self.get("shrink");
            Result<std::unique_ptr<Comm>> r = Status();
            {
              py::gil_scoped_release unlocked;
              r = c->shrink(exclude);
            }
            return py::cast(PyComm(unwrap(std::move(r))));
          },
          py::arg("exclude") = std::vector<int>{},
          "A new communicator of the remaining ranks, without those in `exclude` and those found dead "
          "(ncclCommShrink); every remaining rank calls it with the same list. Works after this communicator "
          "failed (docs/RELIABILITY.md).")
      .def_property_readonly(
          "rank", [](const PyComm& self) { return self.get("rank")->rank(); }, "This rank, 0 <= rank < size.")
      .def_property_readonly(
          "size", [](const PyComm& self) { return self.get("size")->size(); }, "The number of ranks.")
      .def_property_readonly(
          "id", [](const PyComm& self) { return self.get("id")->id(); },
          "Random 64-bit id shared by the ranks of this communicator (it appears in ferry's logs).")
      .def_property_readonly(
          "device", [](const PyComm& self) { return self.get("device")->device(); },
          "The CUDA device this rank drives, or -1.")
      .def_property(
          "reproducible", [](const PyComm& self) { return self.get("reproducible")->reproducible(); },
          [](const PyComm& self, bool on) { self.get("reproducible")->setReproducible(on); },
          "Reproducible mode (FERRY_REPRODUCIBLE sets the default): sums and averages of float types give the "
          "same bits whatever the algorithm, call split and rank order. Set it on every rank alike, with no "
          "work in flight.")
      .def_property_readonly("closed", &PyComm::closed, "True after close().")
      .def(
          "error",
          [](const PyComm& self) -> py::object {
            Status st = self.get("error")->error();
            return st.isOk() ? py::none() : exceptionFor(st);
          },
          "None, or the sticky error (a ferry.Error instance, not raised) that every call now raises.")
      .def(
          "abort",
          [](const PyComm& self, const std::string& reason) {
            auto c = self.get("abort");
            py::gil_scoped_release unlocked;
            c->abort(reason);
          },
          py::arg("reason") = "aborted by the application",
          "Mark the communicator failed: blocked and later calls raise ferry.AbortedError.")
      .def("close", &PyComm::close,
           "Destroy the communicator (idempotent). Peers still running collectives on it see this rank as gone; "
           "queued async operations fail with ferry.AbortedError.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyComm& self, py::args) { self.close(); })
      .def("__repr__", [](const PyComm& self) {
        if (self.closed()) return std::string("<ferry.Comm closed>");
        auto c = self.get("repr");
        return "<ferry.Comm rank " + std::to_string(c->rank()) + " of " + std::to_string(c->size()) + ", id " +
               hexId(c->id()) + ">";
      });
  registerCollectives(cls);
}

}  // namespace ferry::bindings
