/* occtune's launch plans in C++: what a family's Python launcher decided for a call, kept per key
 * and launched again with a later call's pointers through the driver, with no Python.
 *
 * An op's C++ kernel (kernels/<family>/op_native.cpp) keys a call by its tensors' shapes, strides,
 * dtypes and devices and its scalar arguments (add_tensor / add_ints). The first call of a key runs
 * the family's Python kernel, which checks the call and makes its plan; the op then asks Python to
 * describe that plan (a list of ints, parse_launches) and keeps it. Later calls fill the pointer
 * slots and launch (launch_all) on the current stream, found through torch's device guard.
 *
 * The driver functions come from Python as addresses (set_driver): cuLaunchKernel or
 * hipModuleLaunchKernel (the same arguments), and cuStreamIsCapturing or hipStreamIsCapturing, so
 * no CUDA or ROCm header is needed, only torch's.
 */
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace occtune {

using LaunchFn = int (*)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned smem, void *stream, void **params, void **extra);
using CapturingFn = int (*)(void *stream, int *status);

inline std::atomic<LaunchFn> launch_fn{nullptr};
inline std::atomic<CapturingFn> capturing_fn{nullptr};

// Held while a call enqueues launches that must reach their stream without another call's launches
// between them (several launches through one workspace, or a workspace that plans share): torch
// ops release the GIL, so two threads may launch on one stream at once.
inline std::mutex launch_order;

inline void set_driver(int64_t launch, int64_t capturing) {
  TORCH_CHECK(launch != 0 && capturing != 0, "occtune: a driver function's address is 0");
  capturing_fn.store(reinterpret_cast<CapturingFn>(static_cast<uintptr_t>(capturing)));
  launch_fn.store(reinterpret_cast<LaunchFn>(static_cast<uintptr_t>(launch)));
}

// A parameter of a launch, as a description gives it: (kind, value).
enum ParamKind : int64_t { INT32 = 0, POINTER = 1, INT64 = 2, NULL_POINTER = 3 };
constexpr size_t MAX_PARAMS = 64;

struct Launch {
  void *fn = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block = 0, smem = 0;
  std::vector<int64_t> params;     // kind, value, kind, value, ...
};

using Key = std::vector<int64_t>;

struct KeyHash {
  size_t operator()(const Key &key) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : key) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

inline void add_int(Key &key, const std::optional<int64_t> &v) {
  key.push_back(v.has_value());
  key.push_back(v.has_value() ? *v : 0);
}

inline void add_tensor(Key &key, const std::optional<at::Tensor> &t) {
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

// Reads a description's launches from d[i]: their count, then per launch the driver function,
// grid x, y, z, block, dynamic shared bytes, parameter count and each parameter (kind, value)
// with pointer slots below ``slots``. Returns the index after them.
inline size_t parse_launches(const std::vector<int64_t> &d, size_t i, int64_t slots, std::vector<Launch> &out) {
  auto next = [&]() -> int64_t {
    TORCH_CHECK(i < d.size(), "occtune: a plan's description ends early");
    return d[i++];
  };
  const int64_t n = next();
  for (int64_t l = 0; l < n; ++l) {
    Launch x;
    x.fn = reinterpret_cast<void *>(static_cast<uintptr_t>(next()));
    for (unsigned &g : x.grid) g = static_cast<unsigned>(next());
    x.block = static_cast<unsigned>(next());
    x.smem = static_cast<unsigned>(next());
    const int64_t np = next();
    TORCH_CHECK(np >= 0 && np <= static_cast<int64_t>(MAX_PARAMS), "occtune: a launch of ", np, " parameters");
    for (int64_t p = 0; p < np; ++p) {
      const int64_t kind = next(), value = next();
      const bool ok = (kind == INT32 && value >= INT32_MIN && value <= INT32_MAX) ||
                      (kind == POINTER && value >= 0 && value < slots) || kind == INT64 ||
                      (kind == NULL_POINTER && value == 0);
      TORCH_CHECK(ok, "occtune: bad parameter ", p, " of launch ", l, " in a plan's description");
      x.params.push_back(kind);
      x.params.push_back(value);
    }
    out.push_back(std::move(x));
  }
  return i;
}

// Launches ``launches`` in order on ``stream`` with pointer slot i = ptrs[i]. Returns the driver's
// error of the first launch that failed (0: all started) and sets ``failed`` to its index.
inline int launch_all(const std::vector<Launch> &launches, void *stream, const uint64_t *ptrs, size_t &failed) {
  const LaunchFn launch = launch_fn.load(std::memory_order_relaxed);
  for (size_t l = 0; l < launches.size(); ++l) {
    const Launch &x = launches[l];
    int64_t values[MAX_PARAMS];
    void *params[MAX_PARAMS];
    const size_t np = x.params.size() / 2;
    for (size_t p = 0; p < np; ++p) {
      const int64_t kind = x.params[2 * p], value = x.params[2 * p + 1];
      if (kind == POINTER) {
        params[p] = const_cast<uint64_t *>(&ptrs[value]);
        continue;
      }
      if (kind == INT32) {
        const int32_t v = static_cast<int32_t>(value);
        std::memcpy(&values[p], &v, sizeof v);
      } else {
        values[p] = value;                     // INT64, or NULL_POINTER's 0
      }
      params[p] = &values[p];
    }
    const int rc = launch(x.fn, x.grid[0], x.grid[1], x.grid[2], x.block, 1u, 1u, x.smem, stream, params, nullptr);
    if (rc != 0) {
      failed = l;
      return rc;
    }
  }
  return 0;
}

// The raw stream to launch ``t``'s work on: torch's current stream of t's device, when t is a GPU
// tensor, its device the current one and its stream not being captured into a graph (else
// nullopt: the family's Python path, which handles all three).
inline std::optional<void *> launch_stream(const at::Tensor &t) {
  const CapturingFn capturing = capturing_fn.load(std::memory_order_relaxed);
  if (launch_fn.load(std::memory_order_relaxed) == nullptr || capturing == nullptr || !t.is_cuda()) return std::nullopt;
  const auto *guard = c10::impl::getDeviceGuardImpl(t.device().type());
  if (guard->getDevice() != t.device()) return std::nullopt;
  void *stream = guard->getStream(t.device()).native_handle();
  int status = 0;
  if (capturing(stream, &status) != 0 || status != 0) return std::nullopt;
  return stream;
}

inline uint64_t address(const at::Tensor &t) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
}

// A family's plans by key and the counts its stats op reports. ``mu`` also guards what the family
// keeps beside its plans (its per-stream workspaces); it is never held while Python runs.
template <class Plan>
struct PlanTable {
  std::mutex mu;
  std::unordered_map<Key, std::shared_ptr<Plan>, KeyHash> plans;
  std::atomic<int64_t> hits{0}, misses{0}, python{0}, errors{0};   // errors: launches, descriptions

  std::shared_ptr<Plan> find(const Key &key) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = plans.find(key);
    return it == plans.end() ? nullptr : it->second;
  }

  // Keeps ``describe()``, the plan of a call Python just ran, under ``key``; where it throws, a
  // Python-only plan (Plan{}): the call is done, and its key runs in Python from now on.
  template <class Describe>
  void learn(Key key, Describe describe) {
    std::shared_ptr<Plan> plan;
    try {
      plan = describe();
    } catch (const std::exception &) {
      errors++;
      plan = std::make_shared<Plan>();
    }
    std::lock_guard<std::mutex> lock(mu);
    plans.emplace(std::move(key), std::move(plan));
  }

  // Launches ``launches`` (launch_all), under launch_order where ``ordered``. True when all started;
  // false when the first found no context current in this thread (CUDA 201) or another device's
  // (400): the family's Python launcher makes the device's primary context current and launches
  // again. Any other failure raises, naming ``what``.
  bool launch(const std::vector<Launch> &launches, void *stream, const uint64_t *ptrs, bool ordered, const char *what) {
    size_t failed = 0;
    int rc;
    {
      std::unique_lock<std::mutex> order(launch_order, std::defer_lock);
      if (ordered) order.lock();
      rc = launch_all(launches, stream, ptrs, failed);
    }
    if (rc == 0) {
      hits++;
      return true;
    }
    errors++;
    TORCH_CHECK(failed == 0 && (rc == 201 || rc == 400), "occtune ", what, ": launch ", failed, " of ",
                launches.size(), " failed with driver error ", rc);
    return false;
  }

  // The stats op's answer: plans, hits, misses, Python runs of a known key, errors.
  std::vector<int64_t> stats() {
    std::lock_guard<std::mutex> lock(mu);
    return {static_cast<int64_t>(plans.size()), hits.load(), misses.load(), python.load(), errors.load()};
  }
};

}  // namespace occtune
