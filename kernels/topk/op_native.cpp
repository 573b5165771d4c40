/* torch.ops.occtune.topk's CUDA/HIP kernel in C++: a repeated call costs the dispatcher, one
 * output allocation and the driver's launches, with no Python on the way.
 *
 * The Python launcher (runtime.py) stays the one place that checks arguments and decides a plan.
 * This file only remembers plans: the first call of a key (the call's tensors' shapes, strides,
 * dtypes and devices, k and the config) goes to occtune::_topk_py (runtime.topk, in Python), then
 * asks occtune::_topk_describe for that plan's launches (runtime.native_description: kernel, grid,
 * block, shared bytes, and each parameter, a 32-bit int or pointer number i of runtime.py's
 * SCORES ... WS). Later calls of the key launch those with this call's pointers
 * (tuner/build/plan_launch.h, with the driver functions whose addresses Python gave to
 * occtune::_topk_native_init).
 *
 * Python still runs a call that is being captured into a CUDA graph (the graph gets its own
 * workspace), one on a stream of a device other than the current one, one with a page table or
 * offsets, one whose plan has a launch without a driver-API handle, and one whose first launch
 * finds no current context (Python makes the primary context current and launches again).
 *
 * Buffers a call needs besides its output, as runtime.py's plans keep them: a 1-int placeholder
 * for absent tensors, the [B, 2] sink of the bin counts and row flags (never read), and the
 * workspace that the split and resident paths need zeroed at a call's start (one per stream,
 * zeroed once; every call leaves it zeroed). Only torch headers are needed, no CUDA or ROCm ones.
 */
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <unordered_map>

#include "plan_launch.h"

namespace {

using occtune::Key;

constexpr int64_t FORMAT = 2;           // runtime.NATIVE_FORMAT
constexpr int NPTRS = 8;                // SCORES LENGTHS STARTS OUT TABLE BINS SCRATCH WS

struct Plan {
  bool native = false;                  // false: every call of the key runs in Python
  std::vector<occtune::Launch> launches;
  int64_t rows = 0, k = 0, ws_numel = 0, scratch_numel = 0;
  at::Tensor dummy, sink;
  std::unordered_map<void *, at::Tensor> ws;   // stream -> its zeroed workspace
};

occtune::PlanTable<Plan> table;

Key key_of(const at::Tensor &scores, int64_t k, const std::optional<at::Tensor> &lengths,
           const std::optional<at::Tensor> &row_starts, std::optional<int64_t> lds_budget,
           std::optional<int64_t> threads, std::optional<int64_t> bits) {
  Key key;
  key.reserve(24);
  occtune::add_tensor(key, scores);
  key.push_back(k);
  occtune::add_tensor(key, lengths);
  occtune::add_tensor(key, row_starts);
  for (const auto &v : {lds_budget, threads, bits}) occtune::add_int(key, v);
  return key;
}

at::Tensor python_topk(const at::Tensor &scores, int64_t k, const std::optional<at::Tensor> &lengths,
                       const std::optional<at::Tensor> &row_starts, std::optional<int64_t> lds_budget,
                       std::optional<int64_t> threads, std::optional<int64_t> bits,
                       const std::optional<at::Tensor> &page_table, int64_t page_bits,
                       const std::optional<at::Tensor> &offsets) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("occtune::_topk_py", "").typed<at::Tensor(
      const at::Tensor &, int64_t, const std::optional<at::Tensor> &, const std::optional<at::Tensor> &,
      std::optional<int64_t>, std::optional<int64_t>, std::optional<int64_t>, const std::optional<at::Tensor> &,
      int64_t, const std::optional<at::Tensor> &)>();
  return op.call(scores, k, lengths, row_starts, lds_budget, threads, bits, page_table, page_bits, offsets);
}

std::vector<int64_t> python_describe(const at::Tensor &scores, int64_t k, const std::optional<at::Tensor> &lengths,
                                     const std::optional<at::Tensor> &row_starts, std::optional<int64_t> lds_budget,
                                     std::optional<int64_t> threads, std::optional<int64_t> bits) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("occtune::_topk_describe", "").typed<
      std::vector<int64_t>(const at::Tensor &, int64_t, const std::optional<at::Tensor> &,
                           const std::optional<at::Tensor> &, std::optional<int64_t>, std::optional<int64_t>,
                           std::optional<int64_t>)>();
  return op.call(scores, k, lengths, row_starts, lds_budget, threads, bits);
}

// The plan that a description gives (native = false where it is empty: "Python only").
std::shared_ptr<Plan> plan_of(const std::vector<int64_t> &d, const at::Tensor &scores) {
  auto plan = std::make_shared<Plan>();
  if (d.empty()) return plan;
  TORCH_CHECK(d.size() > 5 && d[0] == FORMAT, "occtune::_topk_describe: not a description of format ", FORMAT);
  plan->rows = d[1];
  plan->k = d[2];
  plan->ws_numel = d[3];
  plan->scratch_numel = d[4];
  TORCH_CHECK(occtune::parse_launches(d, 5, NPTRS, plan->launches) == d.size(),
              "occtune::_topk_describe: a description longer than its launches");
  auto ints = scores.options().dtype(at::kInt);
  plan->dummy = at::empty({1}, ints);
  plan->sink = at::empty({std::max<int64_t>(plan->rows, 1), 2}, ints);
  plan->native = !plan->launches.empty();
  return plan;
}

// The workspace of ``stream`` (made and zeroed on it once), or an undefined tensor when none is needed.
at::Tensor workspace(Plan &plan, void *stream, const at::TensorOptions &ints) {
  if (!plan.ws_numel) return at::Tensor();
  std::lock_guard<std::mutex> lock(table.mu);
  auto it = plan.ws.find(stream);
  if (it != plan.ws.end()) return it->second;
  at::Tensor ws = at::zeros({plan.ws_numel}, ints);
  plan.ws.emplace(stream, ws);
  return ws;
}

at::Tensor topk(const at::Tensor &scores, int64_t k, const std::optional<at::Tensor> &lengths,
                const std::optional<at::Tensor> &row_starts, std::optional<int64_t> lds_budget,
                std::optional<int64_t> threads, std::optional<int64_t> bits,
                const std::optional<at::Tensor> &page_table, int64_t page_bits,
                const std::optional<at::Tensor> &offsets) {
  auto python = [&]() {
    return python_topk(scores, k, lengths, row_starts, lds_budget, threads, bits, page_table, page_bits, offsets);
  };
  if (page_table.has_value() || offsets.has_value()) return python();
  const std::optional<void *> stream = occtune::launch_stream(scores);
  if (!stream.has_value()) return python();
  Key key = key_of(scores, k, lengths, row_starts, lds_budget, threads, bits);
  const std::shared_ptr<Plan> plan = table.find(key);
  if (!plan) {                          // the first call of the key: Python plans, checks and runs it
    table.misses++;
    at::Tensor out = python();
    table.learn(std::move(key), [&]() {
      return plan_of(python_describe(scores, k, lengths, row_starts, lds_budget, threads, bits), scores);
    });
    return out;
  }
  if (!plan->native) {
    table.python++;
    return python();
  }
  const auto ints = scores.options().dtype(at::kInt);
  at::Tensor out = at::empty({plan->rows, plan->k}, ints);
  at::Tensor scratch = plan->scratch_numel ? at::empty({plan->scratch_numel}, ints) : at::Tensor();
  at::Tensor ws = workspace(*plan, *stream, ints);
  const uint64_t dummy = occtune::address(plan->dummy);
  const uint64_t ptrs[NPTRS] = {occtune::address(scores), lengths.has_value() ? occtune::address(*lengths) : dummy,
                                row_starts.has_value() ? occtune::address(*row_starts) : dummy,
                                occtune::address(out), dummy, occtune::address(plan->sink),
                                scratch.defined() ? occtune::address(scratch) : dummy,
                                ws.defined() ? occtune::address(ws) : dummy};
  // several launches (the split kernel's records, then the main kernel): none of another call between
  return table.launch(plan->launches, *stream, ptrs, plan->launches.size() > 1, "topk") ? out : python();
}

void native_clear() {
  std::lock_guard<std::mutex> lock(table.mu);
  table.plans.clear();
}

std::vector<int64_t> native_stats() { return table.stats(); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(occtune, m) {
  m.def("_topk_py(Tensor scores, int k, Tensor? lengths, Tensor? row_starts, int? lds_budget, int? threads, "
        "int? bits, Tensor? page_table, int page_bits, Tensor? offsets) -> Tensor");
  m.def("_topk_describe(Tensor scores, int k, Tensor? lengths, Tensor? row_starts, int? lds_budget, "
        "int? threads, int? bits) -> int[]");
  m.def("_topk_native_init(int launch_function, int capturing_function) -> ()", &occtune::set_driver);
  m.def("_topk_native_clear() -> ()", &native_clear);
  m.def("_topk_native_stats() -> int[]", &native_stats);
}

TORCH_LIBRARY_IMPL(occtune, CUDA, m) { m.impl("topk", &topk); }
