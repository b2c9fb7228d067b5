/// @file module.cc
/// The extension module hoccl.torch._c10d: the backend's creator (used by hoccl/torch/__init__.py to register
/// "hoccl" with torch.distributed), the backend's Python type, and the PaRO handle over a backend's communicator.
/// torch.distributed is imported first so that pybind11 knows torch's Store and Backend types.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "hoccl/paro.h"
#include "python/hoccl/torch/process_group.h"
#include "python/hoccl/torch/tensor_check.h"

namespace py = pybind11;
using hoccl_torch::ProcessGroupHoccl;

namespace {

std::chrono::milliseconds toMs(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0 + 0.5));
}

// hocclParoCreate over parent's communicator (on its worker, after its queued work), then one borrowing backend per
// communicator of the handle; the handle is destroyed when the last of them is.
py::dict paroCreate(const c10::intrusive_ptr<ProcessGroupHoccl>& parent, const std::string& strategy, int level) {
  char canonical[4] = {0};
  hoccl_torch::check(hocclParoStrategyParse(strategy.c_str(), canonical), nullptr, "hocclParoStrategyParse");
  TORCH_CHECK_VALUE(level == 0 || level == 1, "hoccl paro_groups: level must be 'host' or 'switch'");
  hocclParo_t paro = nullptr;
  parent->runOnWorker([&](hocclComm_t comm) {
    hoccl_torch::check(hocclParoCreate(comm, canonical, static_cast<hocclParoGroupLevel_t>(level), &paro), comm,
                       "hocclParoCreate");
  });
  std::shared_ptr<void> holder(paro, [](void* p) { hocclParoDestroy(static_cast<hocclParo_t>(p)); });
  int groupSize = 0, ngroups = 0, group = 0, localIndex = 0;
  hoccl_torch::check(hocclParoGetLayout(paro, &groupSize, &ngroups, &group, &localIndex), nullptr,
                     "hocclParoGetLayout");
  py::dict out;
  out["strategy"] = std::string(canonical);
  out["group_size"] = groupSize;
  out["ngroups"] = ngroups;
  out["group"] = group;
  out["local_index"] = localIndex;
  const char* names[] = {"intra", "inter", "global"};
  for (int which = 0; which < 3; ++which) {
    hocclComm_t c = nullptr;
    hoccl_torch::check(hocclParoGetComm(paro, static_cast<hocclParoComm_t>(which), &c), nullptr, "hocclParoGetComm");
    if (c == nullptr) {
      out[names[which]] = py::none();
      continue;
    }
    int rank = 0, size = 0;
    hoccl_torch::check(hocclCommUserRank(c, &rank), c, "hocclCommUserRank");
    hoccl_torch::check(hocclCommCount(c, &size), c, "hocclCommCount");
    auto backend = c10::make_intrusive<ProcessGroupHoccl>(c, rank, size, parent->timeout(), /*ownsComm=*/false, holder);
    backend->setOrigin("hocclParoCreate");
    out[names[which]] = backend;
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "hoccl's c10d backend for torch.distributed (CPU tensors)";
  py::module::import("torch.distributed");

  py::class_<ProcessGroupHoccl, c10d::Backend, c10::intrusive_ptr<ProcessGroupHoccl>>(m, "ProcessGroupHoccl",
                                                                                      "The hoccl c10d backend")
      .def_property_readonly("timeout_s", [](const ProcessGroupHoccl& pg) { return pg.timeout().count() / 1000.0; })
      .def_property_readonly("origin", &ProcessGroupHoccl::origin,
                             "The hoccl call that made the communicator: hocclCommInitRank, hocclCommSplit or "
                             "hocclParoCreate")
      .def(
          "perform_nocolor_split", [](ProcessGroupHoccl& pg, const at::Device&) { pg.split(nullptr, {}, nullptr); },
          py::arg("device"), py::call_guard<py::gil_scoped_release>(),
          "new_group on a rank outside the new group, when new_group splits the parent: hocclCommSplit with "
          "HOCCL_SPLIT_NOCOLOR (every rank of the parent takes part in the split)");

  m.def(
      "split",
      [](const c10::intrusive_ptr<ProcessGroupHoccl>& parent, const std::vector<int>& ranks, double timeoutS) {
    auto opts = c10::make_intrusive<c10d::Backend::Options>("hoccl", toMs(timeoutS));
    auto child = parent->split(nullptr, ranks, opts);
    TORCH_CHECK(child, "hoccl split: rank ", parent->getRank(), " of the parent is not among the ", ranks.size(),
                " ranks of the new group");
    return c10::static_intrusive_pointer_cast<ProcessGroupHoccl>(child);
      },
      py::arg("parent"), py::arg("ranks"), py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>(),
      "new_group on a member, when new_group splits the parent: hocclCommSplit of parent (ranks: the new group's "
      "ranks in the parent, in group-rank order)");

  m.def(
      "create",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeoutS) {
    return ProcessGroupHoccl::create(store, rank, size, toMs(timeoutS));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
      py::call_guard<py::gil_scoped_release>(),
      "Creates the backend: rank 0 publishes a hoccl unique id in the store, every rank joins the communicator");
  m.def("paro_create", &paroCreate, py::arg("parent"), py::arg("strategy"), py::arg("level"),
        "hocclParoCreate over parent's communicator: a dict of the layout and the intra/inter/global backends");
  m.def(
      "_check_device", [](const std::string& device) { hoccl_torch::checkDevice(at::Device(device), "test"); },
      py::arg("device"),
      "The backend's device check for a device name (raises ValueError unless it is the CPU); for tests on machines "
      "without that device");
  m.def(
      "version",
      [] {
    int v = 0;
    hocclGetVersion(&v);
    return v;
      },
      "hoccl's version code");
}
