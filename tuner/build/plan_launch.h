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
 * no CUDA or ROCm header is needed, only torch's. A family whose kernels take host TMA descriptors
 * (CUtensorMap, by value) also hands over cuTensorMapEncodeTiled (set_tensor_map_encoder): a
 * descriptor is encoded from C++ with the arguments Triton's launcher gives it (Triton 3.6,
 * backends/nvidia/driver.c fillTMADescriptor), again only when its tensor's address changed.
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
// cuTensorMapEncodeTiled: map, data type, rank, address, dims, byte strides (rank - 1), box dims,
// element strides, interleave, swizzle, L2 promotion, out-of-bounds fill (the enums are ints)
using EncodeFn = int (*)(void *map, int dtype, uint32_t rank, void *address, const uint64_t *dims,
                         const uint64_t *strides, const uint32_t *box, const uint32_t *element_strides,
                         int interleave, int swizzle, int l2_promotion, int fill);

inline std::atomic<LaunchFn> launch_fn{nullptr};
inline std::atomic<CapturingFn> capturing_fn{nullptr};
inline std::atomic<EncodeFn> encode_fn{nullptr};

// Held while a call enqueues launches that must reach their stream without another call's launches
// between them (several launches through one workspace, or a workspace that plans share): torch
// ops release the GIL, so two threads may launch on one stream at once.
inline std::mutex launch_order;

inline void set_driver(int64_t launch, int64_t capturing) {
  TORCH_CHECK(launch != 0 && capturing != 0, "occtune: a driver function's address is 0");
  capturing_fn.store(reinterpret_cast<CapturingFn>(static_cast<uintptr_t>(capturing)));
  launch_fn.store(reinterpret_cast<LaunchFn>(static_cast<uintptr_t>(launch)));
}

inline void set_tensor_map_encoder(int64_t encode) {
  TORCH_CHECK(encode != 0, "occtune: cuTensorMapEncodeTiled's address is 0");
  encode_fn.store(reinterpret_cast<EncodeFn>(static_cast<uintptr_t>(encode)));
}

// A parameter of a launch, as a description gives it: (kind, value); TENSOR_MAP's value is a
// pointer slot, and its record (TensorMap::parse) follows the pair.
enum ParamKind : int64_t { INT32 = 0, POINTER = 1, INT64 = 2, NULL_POINTER = 3, TENSOR_MAP = 4 };
constexpr size_t MAX_PARAMS = 64;
constexpr size_t MAX_MAPS = 4;       // host descriptors a launch
constexpr size_t MAP_BYTES = 128;    // sizeof(CUtensorMap)

// A host TMA descriptor over the tensor in pointer slot ``slot``: everything but the address is
// the plan's (shapes and strides are part of a plan's key), so it is encoded again only when the
// address is not one of the last two encoded (a call's output or tokens often alternate between
// two buffers). ``mu`` guards the kept encodings (calls of one plan may come from two threads).
struct TensorMap {
  int64_t slot = 0;
  int dtype = 0, swizzle = 0, fill = 0;
  uint32_t rank = 0, box[5] = {}, element_strides[5] = {1, 1, 1, 1, 1};
  uint64_t dims[5] = {}, strides[5] = {};
  std::mutex mu;
  uint64_t address[2] = {0, 0};      // of the kept encodings (0: none)
  int older = 0;                     // the one to replace next
  alignas(64) unsigned char map[2][MAP_BYTES] = {};

  // The record after (TENSOR_MAP, slot): CUtensorMapDataType, element bytes, swizzle, padding
  // (1: NaN), rank, then the block, the shape and the strides in elements, each outermost first
  // (as torch gives them); stored innermost first, the strides in bytes, as Triton encodes them.
  template <class Next>
  void parse(int64_t slot_, Next next) {
    slot = slot_;
    dtype = static_cast<int>(next());
    const int64_t elem = next();
    swizzle = static_cast<int>(next());
    fill = next() == 1 ? 1 : 0;        // CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : _NONE
    const int64_t r = next();
    TORCH_CHECK(r >= 1 && r <= 5 && elem >= 1 && elem <= 16, "occtune: a TMA descriptor of rank ", r, " and ", elem,
                "-byte elements (rank 1-5, 1-16 bytes)");
    rank = static_cast<uint32_t>(r);
    for (uint32_t i = 0; i < rank; ++i) box[rank - 1 - i] = static_cast<uint32_t>(next());
    for (uint32_t i = 0; i < rank; ++i) dims[rank - 1 - i] = static_cast<uint64_t>(next());
    for (uint32_t i = 0; i < rank; ++i) {
      const int64_t stride = next();
      if (i + 1 < rank) strides[rank - 2 - i] = static_cast<uint64_t>(elem * stride);
      else TORCH_CHECK(stride == 1, "occtune: a TMA descriptor's last stride must be 1");
    }
  }

  // Copies the encoding for ``address_`` to ``out`` (encoding it where neither kept one is for
  // that address); the driver's error, 0 on success.
  int encode(uint64_t address_, unsigned char *out) {
    std::lock_guard<std::mutex> lock(mu);
    int k = address_ != 0 && address[0] == address_ ? 0 : address_ != 0 && address[1] == address_ ? 1 : -1;
    if (k < 0) {
      const EncodeFn fn = encode_fn.load(std::memory_order_relaxed);
      if (fn == nullptr) return -1;
      k = older;
      address[k] = 0;
      const int rc = fn(map[k], dtype, rank, reinterpret_cast<void *>(static_cast<uintptr_t>(address_)), dims,
                        strides, box, element_strides, 0 /* INTERLEAVE_NONE */, swizzle, 2 /* L2_128B */, fill);
      if (rc != 0) return rc;
      address[k] = address_;
      older = 1 - k;
    }
    std::memcpy(out, map[k], MAP_BYTES);
    return 0;
  }
};

struct Launch {
  void *fn = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block = 0, smem = 0;
  std::vector<int64_t> params;     // kind, value, kind, value, ... (TENSOR_MAP: the index in maps)
  std::vector<std::unique_ptr<TensorMap>> maps;
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
// with pointer slots below ``slots`` (a TENSOR_MAP pair followed by its record). Returns the index
// after them.
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
                      ((kind == POINTER || kind == TENSOR_MAP) && value >= 0 && value < slots) ||
                      kind == INT64 || (kind == NULL_POINTER && value == 0);
      TORCH_CHECK(ok, "occtune: bad parameter ", p, " of launch ", l, " in a plan's description");
      x.params.push_back(kind);
      if (kind == TENSOR_MAP) {
        TORCH_CHECK(x.maps.size() < MAX_MAPS, "occtune: a launch of more than ", MAX_MAPS, " TMA descriptors");
        x.params.push_back(static_cast<int64_t>(x.maps.size()));
        x.maps.push_back(std::make_unique<TensorMap>());
        x.maps.back()->parse(value, next);
      } else {
        x.params.push_back(value);
      }
    }
    out.push_back(std::move(x));
  }
  return i;
}

// Launches ``launches`` in order on ``stream`` with pointer slot i = ptrs[i]. Returns the driver's
// error of the first launch that failed (0: all started; -1: a TMA descriptor but no encoder) and
// sets ``failed`` to its index.
inline int launch_all(const std::vector<Launch> &launches, void *stream, const uint64_t *ptrs, size_t &failed) {
  const LaunchFn launch = launch_fn.load(std::memory_order_relaxed);
  for (size_t l = 0; l < launches.size(); ++l) {
    const Launch &x = launches[l];
    int64_t values[MAX_PARAMS];
    void *params[MAX_PARAMS];
    alignas(64) unsigned char maps[MAX_MAPS][MAP_BYTES];
    const size_t np = x.params.size() / 2;
    for (size_t p = 0; p < np; ++p) {
      const int64_t kind = x.params[2 * p], value = x.params[2 * p + 1];
      if (kind == POINTER) {
        params[p] = const_cast<uint64_t *>(&ptrs[value]);
        continue;
      }
      if (kind == TENSOR_MAP) {
        TensorMap &tm = *x.maps[value];
        const int rc = tm.encode(ptrs[tm.slot], maps[value]);
        if (rc != 0) {
          failed = l;
          return rc;
        }
        params[p] = maps[value];
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
