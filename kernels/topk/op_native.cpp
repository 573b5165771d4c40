/* torch.ops.occtune.topk's CUDA/HIP kernel in C++: a repeated call costs the dispatcher, one
 * output allocation and the driver's launches, with no Python on the way.
 *
 * The Python launcher (runtime.py) stays the one place that checks arguments and decides a plan.
 * This file only remembers plans: the first call of a key (the call's tensors' shapes, strides,
 * dtypes and devices, k and the config) goes to occtune::_topk_py (runtime.topk, in Python), then
 * asks occtune::_topk_describe for that plan's launches (kernel, grid, block, shared bytes, and
 * each parameter: a 32-bit int, or pointer number i of runtime.py's SCORES ... WS). Later calls of
 * the key launch those with this call's pointers, through the driver launch function whose address
 * Python gave to occtune::_topk_native_init (cuLaunchKernel / hipModuleLaunchKernel; with it
 * cuStreamIsCapturing / hipStreamIsCapturing, which tells a captured call).
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
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace {

using LaunchFn = int (*)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned smem, void *stream, void **params, void **extra);
using CapturingFn = int (*)(void *stream, int *status);     // cuStreamIsCapturing / hipStreamIsCapturing

constexpr int64_t FORMAT = 1;           // _topk_describe's layout (runtime.native_description)
constexpr int NPTRS = 8;                // SCORES LENGTHS STARTS OUT TABLE BINS SCRATCH WS
enum { SCORES, LENGTHS, STARTS, OUT, TABLE, BINS, SCRATCH, WS };
constexpr int MAX_PARAMS = 64;

struct Launch {
  void *fn = nullptr;
  unsigned grid = 0, block = 0, smem = 0;
  std::vector<int64_t> params;          // per parameter: kind (0 int32, 1 pointer), value
};

struct Plan {
  bool native = false;                  // false: every call of the key runs in Python
  std::vector<Launch> launches;
  int64_t rows = 0, k = 0, ws_numel = 0, scratch_numel = 0;
  at::Tensor dummy, sink;
  std::unordered_map<void *, at::Tensor> ws;   // stream -> its zeroed workspace
};

using Key = std::vector<int64_t>;

struct KeyHash {
  size_t operator()(const Key &key) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : key) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

std::mutex mu;
std::unordered_map<Key, std::shared_ptr<Plan>, KeyHash> plans;
std::atomic<LaunchFn> launch_fn{nullptr};
std::atomic<CapturingFn> capturing_fn{nullptr};
std::atomic<int64_t> counts[4];          // hits, misses, Python runs of a known key, launch errors

void add_tensor(Key &key, const std::optional<at::Tensor> &t) {
  if (!t.has_value()) {
    key.push_back(-1);
    return;
  }
  key.push_back(t->dim());
  for (int64_t s : t->sizes()) key.push_back(s);
  for (int64_t s : t->strides()) key.push_back(s);
  key.push_back(static_cast<int64_t>(t->scalar_type()));
  key.push_back(static_cast<int64_t>(t->device().type()));
  key.push_back(t->device().index());
}

Key key_of(const at::Tensor &scores, int64_t k, const std::optional<at::Tensor> &lengths,
           const std::optional<at::Tensor> &row_starts, std::optional<int64_t> lds_budget,
           std::optional<int64_t> threads, std::optional<int64_t> bits) {
  Key key;
  key.reserve(24);
  add_tensor(key, scores);
  key.push_back(k);
  add_tensor(key, lengths);
  add_tensor(key, row_starts);
  for (const auto &v : {lds_budget, threads, bits}) key.push_back(v.has_value() ? *v : -1);
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

// The plan that a description gives (a plan with native = false where it says "Python only").
std::shared_ptr<Plan> plan_of(const std::vector<int64_t> &d, const at::Tensor &scores) {
  auto plan = std::make_shared<Plan>();
  size_t i = 0;
  auto next = [&]() -> int64_t {
    TORCH_CHECK(i < d.size(), "occtune::_topk_describe: description ends early");
    return d[i++];
  };
  if (d.empty()) return plan;
  TORCH_CHECK(next() == FORMAT, "occtune::_topk_describe: unknown description format ", d[0]);
  plan->rows = next();
  plan->k = next();
  plan->ws_numel = next();
  plan->scratch_numel = next();
  const int64_t n = next();
  for (int64_t l = 0; l < n; ++l) {
    Launch launch;
    launch.fn = reinterpret_cast<void *>(static_cast<uintptr_t>(next()));
    launch.grid = static_cast<unsigned>(next());
    launch.block = static_cast<unsigned>(next());
    launch.smem = static_cast<unsigned>(next());
    const int64_t np = next();
    TORCH_CHECK(np >= 0 && np <= MAX_PARAMS, "occtune::_topk_describe: ", np, " parameters");
    for (int64_t p = 0; p < np; ++p) {
      const int64_t kind = next(), value = next();
      TORCH_CHECK((kind == 0 && value >= INT32_MIN && value <= INT32_MAX) || (kind == 1 && value >= 0 && value < NPTRS),
                  "occtune::_topk_describe: bad parameter ", p, " of launch ", l);
      launch.params.push_back(kind);
      launch.params.push_back(value);
    }
    plan->launches.push_back(std::move(launch));
  }
  TORCH_CHECK(i == d.size(), "occtune::_topk_describe: description longer than its launches");
  auto ints = scores.options().dtype(at::kInt);
  plan->dummy = at::empty({1}, ints);
  plan->sink = at::empty({std::max<int64_t>(plan->rows, 1), 2}, ints);
  plan->native = !plan->launches.empty();
  return plan;
}

// The workspace of ``stream`` (made and zeroed on it once), or an undefined tensor when none is needed.
at::Tensor workspace(Plan &plan, void *stream, const at::TensorOptions &ints) {
  if (!plan.ws_numel) return at::Tensor();
  std::lock_guard<std::mutex> lock(mu);
  auto it = plan.ws.find(stream);
  if (it != plan.ws.end()) return it->second;
  at::Tensor ws = at::zeros({plan.ws_numel}, ints);
  plan.ws.emplace(stream, ws);
  return ws;
}

// Launches every kernel of ``plan``; the driver's error of the first failure (0: all started) and its index.
int launch_all(const Plan &plan, void *stream, const uint64_t (&ptrs)[NPTRS], size_t &failed) {
  const LaunchFn launch = launch_fn.load(std::memory_order_relaxed);
  for (size_t l = 0; l < plan.launches.size(); ++l) {
    const Launch &x = plan.launches[l];
    int32_t ints[MAX_PARAMS];
    void *params[MAX_PARAMS];
    const size_t np = x.params.size() / 2;
    for (size_t p = 0; p < np; ++p) {
      const int64_t value = x.params[2 * p + 1];
      if (x.params[2 * p] == 0) {
        ints[p] = static_cast<int32_t>(value);
        params[p] = &ints[p];
      } else {
        params[p] = const_cast<uint64_t *>(&ptrs[value]);
      }
    }
    const int rc = launch(x.fn, x.grid, 1u, 1u, x.block, 1u, 1u, x.smem, stream, params, nullptr);
    if (rc != 0) {
      failed = l;
      return rc;
    }
  }
  return 0;
}

uint64_t address(const at::Tensor &t) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())); }

at::Tensor topk(const at::Tensor &scores, int64_t k, const std::optional<at::Tensor> &lengths,
                const std::optional<at::Tensor> &row_starts, std::optional<int64_t> lds_budget,
                std::optional<int64_t> threads, std::optional<int64_t> bits,
                const std::optional<at::Tensor> &page_table, int64_t page_bits,
                const std::optional<at::Tensor> &offsets) {
  auto python = [&]() {
    return python_topk(scores, k, lengths, row_starts, lds_budget, threads, bits, page_table, page_bits, offsets);
  };
  if (page_table.has_value() || offsets.has_value() || launch_fn.load(std::memory_order_relaxed) == nullptr)
    return python();
  const auto *guard = c10::impl::getDeviceGuardImpl(scores.device().type());
  if (guard->getDevice() != scores.device()) return python();
  void *stream = guard->getStream(scores.device()).native_handle();
  int capture = 0;
  const int crc = capturing_fn.load(std::memory_order_relaxed)(stream, &capture);
  if (crc != 0 || capture != 0) return python();       // being captured (or cannot tell): Python's path
  Key key = key_of(scores, k, lengths, row_starts, lds_budget, threads, bits);
  std::shared_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = plans.find(key);
    if (it != plans.end()) plan = it->second;
  }
  if (!plan) {                          // the first call of the key: Python plans, checks and runs it
    counts[1]++;
    at::Tensor out = python();
    auto learned = plan_of(python_describe(scores, k, lengths, row_starts, lds_budget, threads, bits), scores);
    std::lock_guard<std::mutex> lock(mu);
    plans.emplace(std::move(key), std::move(learned));
    return out;
  }
  if (!plan->native) {
    counts[2]++;
    return python();
  }
  const auto ints = scores.options().dtype(at::kInt);
  at::Tensor out = at::empty({plan->rows, plan->k}, ints);
  at::Tensor scratch = plan->scratch_numel ? at::empty({plan->scratch_numel}, ints) : at::Tensor();
  at::Tensor ws = workspace(*plan, stream, ints);
  const uint64_t dummy = address(plan->dummy);
  const uint64_t ptrs[NPTRS] = {address(scores), lengths.has_value() ? address(*lengths) : dummy,
                                row_starts.has_value() ? address(*row_starts) : dummy, address(out), dummy,
                                address(plan->sink), scratch.defined() ? address(scratch) : dummy,
                                ws.defined() ? address(ws) : dummy};
  size_t failed = 0;
  const int rc = launch_all(*plan, stream, ptrs, failed);
  if (rc == 0) {
    counts[0]++;
    return out;
  }
  counts[3]++;
  // No context current in this thread (CUDA 201), or another device's (400): Python's launcher
  // makes the device's primary context current and launches again.
  TORCH_CHECK(failed == 0 && (rc == 201 || rc == 400), "occtune topk: launch ", failed, " of ",
              plan->launches.size(), " failed with driver error ", rc);
  return python();
}

void native_init(int64_t launch, int64_t capturing) {
  TORCH_CHECK(launch != 0 && capturing != 0, "occtune::_topk_native_init: a driver function's address is 0");
  capturing_fn.store(reinterpret_cast<CapturingFn>(static_cast<uintptr_t>(capturing)));
  launch_fn.store(reinterpret_cast<LaunchFn>(static_cast<uintptr_t>(launch)));
}

void native_clear() {
  std::lock_guard<std::mutex> lock(mu);
  plans.clear();
}

std::vector<int64_t> native_stats() {
  std::lock_guard<std::mutex> lock(mu);
  return {static_cast<int64_t>(plans.size()), counts[0].load(), counts[1].load(), counts[2].load(),
          counts[3].load()};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(occtune, m) {
  m.def("_topk_py(Tensor scores, int k, Tensor? lengths, Tensor? row_starts, int? lds_budget, int? threads, "
        "int? bits, Tensor? page_table, int page_bits, Tensor? offsets) -> Tensor");
  m.def("_topk_describe(Tensor scores, int k, Tensor? lengths, Tensor? row_starts, int? lds_budget, "
        "int? threads, int? bits) -> int[]");
  m.def("_topk_native_init(int launch_function, int capturing_function) -> ()", &native_init);
  m.def("_topk_native_clear() -> ()", &native_clear);
  m.def("_topk_native_stats() -> int[]", &native_stats);
}

TORCH_LIBRARY_IMPL(occtune, CUDA, m) { m.impl("topk", &topk); }
