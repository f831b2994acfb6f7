// systemVerbs(): the VerbsApi of this process. With libibverbs (FERRY_HAVE_IBVERBS) each call is
// the verbs call of the same name; without it, a stub whose device list says ferry was built
// without libibverbs. The device list is read fresh on every call: discovery runs once per
// communicator, and a NIC may come or go between two.
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "transports/nic/ib_sysfs.hpp"
#include "transports/nic/verbs_api.hpp"

#ifndef FERRY_HAVE_IBVERBS
#define FERRY_HAVE_IBVERBS 0
#endif
#ifndef FERRY_IBV_HAS_SPEED_EX
#define FERRY_IBV_HAS_SPEED_EX 0
#endif
#if FERRY_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace ferry::transport::nic {
namespace {

#if FERRY_HAVE_IBVERBS

// An open ibv_context; the destructor is ibv_close_device.
class SystemDevice final : public VerbsDevice {
 public:
  SystemDevice(std::string name, ibv_context* context) : name_(std::move(name)), context_(context) {}
  ~SystemDevice() override { ibv_close_device(context_); }
  SystemDevice(const SystemDevice&) = delete;
  SystemDevice& operator=(const SystemDevice&) = delete;

  Result<int> portCount() override {
    ibv_device_attr attr{};
    // Verbs calls return an errno value (or -1 with errno set, in older providers).
    const int rc = ibv_query_device(context_, &attr);
    if (rc != 0) return failure("ibv_query_device", rc);
    return static_cast<int>(attr.phys_port_cnt);
  }

  Result<PortAttr> queryPort(int port) override {
    ibv_port_attr attr{};
    const int rc = ibv_query_port(context_, static_cast<uint8_t>(port), &attr);
    if (rc != 0) return failure("ibv_query_port", rc, port);
    PortAttr out;
    out.state = static_cast<int>(attr.state);
    out.activeWidth = attr.active_width;
#if FERRY_IBV_HAS_SPEED_EX
    // Speeds past NDR do not fit the 8-bit field: rdma-core >= 48 reports them here instead.
    out.activeSpeed = attr.active_speed_ex != 0 ? static_cast<int>(attr.active_speed_ex) : attr.active_speed;
#else
    out.activeSpeed = attr.active_speed;
#endif
    out.linkLayer = attr.link_layer;
    return out;
  }

  Result<Gid> queryGid(int port, int index) override {
    ibv_gid gid{};
    const int rc = ibv_query_gid(context_, static_cast<uint8_t>(port), index, &gid);
    if (rc != 0) return failure("ibv_query_gid", rc, port);
    Gid out{};
    std::memcpy(out.data(), gid.raw, out.size());
    return out;
  }

 private:
  Status failure(const char* call, int rc, int port = 0) const {
    const int err = rc > 0 ? rc : errno;
    if (port > 0) {
      return makeError(ErrorCode::kSystemError, "%s(%s, port %d) failed: %s", call, name_.c_str(), port,
                       std::strerror(err));
    }
    return makeError(ErrorCode::kSystemError, "%s(%s) failed: %s", call, name_.c_str(), std::strerror(err));
  }

  std::string name_;
  ibv_context* context_;
};

class SystemVerbs final : public VerbsApi {
 public:
  DeviceList listDevices() const override {
    DeviceList out;
    int count = 0;
    errno = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) {
      out.error = errno != 0 ? errno : ENODEV;
      return out;
    }
    for (int i = 0; i < count && list[i] != nullptr; ++i) {
      const char* name = ibv_get_device_name(list[i]);
      if (name != nullptr) out.names.emplace_back(name);
    }
    ibv_free_device_list(list);
    return out;
  }

  Result<std::unique_ptr<VerbsDevice>> openDevice(const std::string& name) const override {
    // ibv_open_device needs the ibv_device of this list; the list may be freed once it is open.
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) {
      return makeError(ErrorCode::kSystemError, "ibv_get_device_list failed: %s", std::strerror(errno));
    }
    ibv_context* context = nullptr;
    bool found = false;
    int err = 0;
    for (int i = 0; i < count && list[i] != nullptr && !found; ++i) {
      const char* n = ibv_get_device_name(list[i]);
      if (n == nullptr || name != n) continue;
      found = true;
      errno = 0;
      context = ibv_open_device(list[i]);
      err = errno;
    }
    ibv_free_device_list(list);
    if (!found) return makeError(ErrorCode::kSystemError, "RDMA device %s is gone", name.c_str());
    if (context == nullptr) {
      return makeError(ErrorCode::kSystemError, "ibv_open_device(%s) failed: %s", name.c_str(),
                       err != 0 ? std::strerror(err) : "no reason given");
    }
    return std::unique_ptr<VerbsDevice>(new SystemDevice(name, context));
  }

  int numaNode(const std::string& name) const override { return readNumaNode(kSysfsInfiniband, name); }

  std::string netdev(const std::string& name, int port) const override {
    return readNetdev(kSysfsInfiniband, name, port);
  }
};

#else  // !FERRY_HAVE_IBVERBS

// No libibverbs at build time: there is never a device, and the list says why.
class SystemVerbs final : public VerbsApi {
 public:
  DeviceList listDevices() const override {
    DeviceList out;
    out.unavailable = "built without libibverbs";
    return out;
  }
  Result<std::unique_ptr<VerbsDevice>> openDevice(const std::string& name) const override {
    return makeError(ErrorCode::kInvalidUsage, "cannot open RDMA device %s: built without libibverbs", name.c_str());
  }
  int numaNode(const std::string&) const override { return -1; }
  std::string netdev(const std::string&, int) const override { return {}; }
};

#endif

}  // namespace

const VerbsApi& systemVerbs() {
  static const SystemVerbs kVerbs;
  return kVerbs;
}

bool builtWithVerbs() { return FERRY_HAVE_IBVERBS != 0; }

}  // namespace ferry::transport::nic
