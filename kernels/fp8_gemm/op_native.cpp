/* torch.ops.occtune.fp8_gemm and fp8_gemm_out's CUDA kernels in C++: a repeated call of a known
 * plan costs the dispatcher, the output's allocation (fp8_gemm) and the launches, no Python.
 *
 * plan.py stays the one place that checks a call and makes its plan. The first call of a key (the
 * tensors' shapes, strides, dtypes and devices, and the config) runs the Python kernel
 * (occtune::_fp8_gemm_py / _fp8_gemm_out_py), then asks occtune::_fp8_gemm_describe for the plan
 * (plan.native_description) and keeps it; later calls launch it with their own pointers
 * (tuner/build/plan_launch.h). Python still runs a call being captured into a CUDA graph, one on
 * a device other than the current one, one whose pointers are not 16-byte aligned (the kernels
 * assume it), and every call of a plan the C++ side cannot launch (its description is empty).
 * PIPE 4-7 and 10 take host TMA descriptors: they are encoded here (plan_launch.h TensorMap) once
 * op.py has handed over cuTensorMapEncodeTiled; before that, their plans run in Python.
 *
 * Split-K partials or Triton's global scratch (PIPE 1-3), and PIPE 9's tickets: one buffer of
 * each per (device, stream), kept across calls and
 * grown when a plan needs more (work on one stream runs in order); the tickets are zeroed when
 * made and every call leaves them zero, as workspace.py's eager buffers.
 */
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <map>

#include "plan_launch.h"

namespace {

using occtune::Key;
using Config = at::OptionalIntArrayRef;

constexpr int64_t FORMAT = 2;        // plan.NATIVE_FORMAT
constexpr int NPTRS = 7;             // plan.ROLES: a, a_s, b, b_s, out, ws, cnt
enum { A, A_S, B, B_S, OUT, WS, CNT };

struct Plan {
  bool native = false;               // false: every call of the key runs in Python
  int64_t m = 0, n = 0, ws_bytes = 0, cnt_numel = 0;
  std::vector<occtune::Launch> launches;
};

struct StreamBuffers {
  at::Tensor ws, cnt;
};

occtune::PlanTable<Plan> table;
std::map<std::pair<int64_t, void *>, StreamBuffers> buffers;     // (device, stream) -> partials, tickets (table.mu)

Key key_of(const at::Tensor &a, const at::Tensor &a_s, const at::Tensor &b, const at::Tensor &b_s,
           const std::optional<at::Tensor> &out, Config config) {
  Key key;
  key.reserve(48);
  if (config.has_value()) {
    key.push_back(static_cast<int64_t>(config->size()));
    for (int64_t v : *config) key.push_back(v);
  } else {
    key.push_back(-1);
  }
  for (const at::Tensor *t : {&a, &a_s, &b, &b_s}) occtune::add_tensor(key, *t);
  occtune::add_tensor(key, out);
  key.push_back(a.is_same(b));         // plan.plan_key's aliasing: one tensor in two roles
  key.push_back(a_s.is_same(b_s));
  return key;
}

at::Tensor python_gemm(const at::Tensor &a, const at::Tensor &a_s, const at::Tensor &b, const at::Tensor &b_s,
                       Config config) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("occtune::_fp8_gemm_py", "").typed<at::Tensor(
      const at::Tensor &, const at::Tensor &, const at::Tensor &, const at::Tensor &, Config)>();
  return op.call(a, a_s, b, b_s, config);
}

void python_gemm_out(const at::Tensor &a, const at::Tensor &a_s, const at::Tensor &b, const at::Tensor &b_s,
                     const at::Tensor &out, Config config) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("occtune::_fp8_gemm_out_py", "").typed<void(
      const at::Tensor &, const at::Tensor &, const at::Tensor &, const at::Tensor &, const at::Tensor &, Config)>();
  op.call(a, a_s, b, b_s, out, config);
}

std::vector<int64_t> python_describe(const at::Tensor &a, const at::Tensor &a_s, const at::Tensor &b,
                                     const at::Tensor &b_s, Config config, const std::optional<at::Tensor> &out) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("occtune::_fp8_gemm_describe", "").typed<
      std::vector<int64_t>(const at::Tensor &, const at::Tensor &, const at::Tensor &, const at::Tensor &, Config,
                           const std::optional<at::Tensor> &)>();
  return op.call(a, a_s, b, b_s, config, out);
}

std::shared_ptr<Plan> plan_of(const std::vector<int64_t> &d) {
  auto plan = std::make_shared<Plan>();
  if (d.empty()) return plan;
  TORCH_CHECK(d.size() > 5 && d[0] == FORMAT, "occtune::_fp8_gemm_describe: not a description of format ", FORMAT);
  plan->m = d[1];
  plan->n = d[2];
  plan->ws_bytes = d[3];
  plan->cnt_numel = d[4];
  TORCH_CHECK(occtune::parse_launches(d, 5, NPTRS, plan->launches) == d.size(),
              "occtune::_fp8_gemm_describe: a description longer than its launches");
  bool maps = false;
  for (const occtune::Launch &x : plan->launches) maps = maps || !x.maps.empty();
  plan->native = !plan->launches.empty() && (!maps || occtune::encode_fn.load() != nullptr);
  return plan;
}

// The stream's partials (ws) and zeroed tickets (cnt) for ``plan``: grown where they are smaller.
StreamBuffers stream_buffers(const Plan &plan, void *stream, const at::Tensor &like) {
  std::lock_guard<std::mutex> lock(table.mu);
  StreamBuffers &held = buffers[{like.device().index(), stream}];
  if (plan.ws_bytes && (!held.ws.defined() || held.ws.numel() < plan.ws_bytes))
    held.ws = at::empty({std::max(plan.ws_bytes, held.ws.defined() ? 2 * held.ws.numel() : 0)},
                        like.options().dtype(at::kByte));
  if (plan.cnt_numel && (!held.cnt.defined() || held.cnt.numel() < plan.cnt_numel))
    held.cnt = at::zeros({std::max(plan.cnt_numel, held.cnt.defined() ? 2 * held.cnt.numel() : 0)},
                         like.options().dtype(at::kInt));
  return held;
}

// Launches the call from C++ where its plan is known and launchable: true; false: run it in Python.
bool launch(const at::Tensor &a, const at::Tensor &a_s, const at::Tensor &b, const at::Tensor &b_s,
            Config config, const std::optional<at::Tensor> &given, at::Tensor *made) {
  const std::optional<void *> stream = occtune::launch_stream(a);
  if (!stream.has_value()) return false;
  Key key = key_of(a, a_s, b, b_s, given, config);
  const std::shared_ptr<Plan> plan = table.find(key);
  if (!plan) {                        // the first call of the key: Python checks, plans and runs it
    table.misses++;
    if (given.has_value()) {
      python_gemm_out(a, a_s, b, b_s, *given, config);
    } else {
      *made = python_gemm(a, a_s, b, b_s, config);
    }
    table.learn(std::move(key), [&]() { return plan_of(python_describe(a, a_s, b, b_s, config, given)); });
    return true;
  }
  if (!plan->native) {
    table.python++;
    return false;
  }
  at::Tensor out = given.has_value() ? *given : at::empty({plan->m, plan->n}, a.options().dtype(at::kBFloat16));
  uint64_t ptrs[NPTRS] = {occtune::address(a), occtune::address(a_s), occtune::address(b), occtune::address(b_s),
                          occtune::address(out), 0, 0};
  if ((ptrs[A] | ptrs[A_S] | ptrs[B] | ptrs[B_S] | ptrs[OUT]) & 15) {
    table.python++;
    return false;                     // the kernels assume 16-byte alignment: Triton specialises again
  }
  const bool shared = plan->ws_bytes || plan->cnt_numel;
  StreamBuffers held;
  // the stream's buffers are every plan's: no other call's launches between these and their use
  std::unique_lock<std::mutex> order(occtune::launch_order, std::defer_lock);
  if (shared) {
    order.lock();
    held = stream_buffers(*plan, *stream, a);
  }
  if (plan->ws_bytes) ptrs[WS] = occtune::address(held.ws);
  if (plan->cnt_numel) ptrs[CNT] = occtune::address(held.cnt);
  if (!table.launch(plan->launches, *stream, ptrs, false, "fp8_gemm")) return false;   // no context: Python
  if (!given.has_value()) *made = out;
  return true;
}

at::Tensor fp8_gemm(const at::Tensor &a, const at::Tensor &a_s, const at::Tensor &b, const at::Tensor &b_s,
                    Config config) {
  at::Tensor out;
  if (launch(a, a_s, b, b_s, config, std::nullopt, &out)) return out;
  return python_gemm(a, a_s, b, b_s, config);
}

void fp8_gemm_out(const at::Tensor &a, const at::Tensor &a_s, const at::Tensor &b, const at::Tensor &b_s,
                  const at::Tensor &out, Config config) {
  if (!launch(a, a_s, b, b_s, config, out, nullptr)) python_gemm_out(a, a_s, b, b_s, out, config);
}

void native_clear() {
  std::lock_guard<std::mutex> lock(table.mu);
  table.plans.clear();
  buffers.clear();
}

std::vector<int64_t> native_stats() { return table.stats(); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(occtune, m) {
  m.def("_fp8_gemm_py(Tensor a, Tensor a_s, Tensor b, Tensor b_s, int[]? config) -> Tensor");
  m.def("_fp8_gemm_out_py(Tensor a, Tensor a_s, Tensor b, Tensor b_s, Tensor(a!) out, int[]? config) -> ()");
  m.def("_fp8_gemm_describe(Tensor a, Tensor a_s, Tensor b, Tensor b_s, int[]? config, Tensor? out) -> int[]");
  m.def("_fp8_gemm_native_init(int launch_function, int capturing_function) -> ()", &occtune::set_driver);
  m.def("_fp8_gemm_native_tma(int encode_function) -> ()", &occtune::set_tensor_map_encoder);
  m.def("_fp8_gemm_native_clear() -> ()", &native_clear);
  m.def("_fp8_gemm_native_stats() -> int[]", &native_stats);
}

TORCH_LIBRARY_IMPL(occtune, CUDA, m) {
  m.impl("fp8_gemm", &fp8_gemm);
  m.impl("fp8_gemm_out", &fp8_gemm_out);
}
