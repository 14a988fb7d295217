// MXNet NDArrays handed to TVM and TVM's results handed back, sharing memory through
// DLPack, one C call each way, for Python (ctypes): tvm_bridge/ndarray_exchange.py.
//
// tvm_bridge views each input array of a compiled function as a TVM tensor and
// makes each result an NDArray. Through MXNet's and TVM's Python APIs that is five
// C calls an input (the context, a wait for pending writes, the data address TVM's
// alignment is checked on, a second wait, the DLPack export) and six a result (the
// export and five capsule and MXNet calls): a fifth of a small policy network's
// call in REINFORCE's episode loop.
#include <cstddef>
#include <cstdint>

#include <dlpack/dlpack.h>
#include <mxnet/ndarray.h>

namespace {

// MXNet's and TVM's C API functions, given by gluon_dyn_use_exchange_functions:
// this library is linked against neither.
int (*wait_to_read)(void*) = nullptr;
int (*get_data)(void*, void**) = nullptr;
int (*to_dlpack)(void*, void**) = nullptr;
int (*from_dlpack)(void*, bool, void**) = nullptr;
int (*free_ndarray)(void*) = nullptr;
int (*tvm_to_dlpack)(void*, DLManagedTensor**) = nullptr;

}  // namespace

extern "C" void gluon_dyn_use_exchange_functions(int (*wait)(void*), int (*data)(void*, void**),
                                                 int (*export_dlpack)(void*, void**),
                                                 int (*import_dlpack)(void*, bool, void**),
                                                 int (*free)(void*),
                                                 int (*tvm_export)(void*, DLManagedTensor**)) {
  wait_to_read = wait;
  get_data = data;
  to_dlpack = export_dlpack;
  from_dlpack = import_dlpack;
  free_ndarray = free;
  tvm_to_dlpack = tvm_export;
}

// For the array `handle`, once MXNet's pending writes to it are done: sets
// `*address` to its data's address and, where that is a multiple of `alignment`,
// `*managed` to a DLManagedTensor viewing it (the caller owns it), else to null.
// Returns 0; 1 where the array is not on the CPU or has no storage (nothing set);
// -1 where MXNet failed (its last error says why).
extern "C" int gluon_dyn_ndarray_cpu_view(void* handle, uint64_t alignment, void** address,
                                          void** managed) {
  const auto* array = static_cast<const mxnet::NDArray*>(handle);
  if (array->is_none() || array->ctx().dev_type != mxnet::Context::kCPU) return 1;
  if (wait_to_read(handle) != 0 || get_data(handle, address) != 0) return -1;
  *managed = nullptr;
  if (reinterpret_cast<uintptr_t>(*address) % alignment != 0) return 0;
  return to_dlpack(handle, managed) != 0 ? -1 : 0;
}

// The TVM tensors `tensors` (TVMFFIObjectHandles) as NDArrays sharing their memory:
// sets `arrays[i]` to a new NDArrayHandle the caller owns. Returns 0; 1 where TVM
// could not export a tensor; -1 where MXNet failed (its last error says why). On
// failure no array is left made.
extern "C" int gluon_dyn_ndarrays_of_tvm(void* const* tensors, size_t count, void** arrays) {
  for (size_t i = 0; i < count; ++i) {
    DLManagedTensor* managed = nullptr;
    int status = 0;
    if (tvm_to_dlpack(tensors[i], &managed) != 0) {
      status = 1;
    } else if (from_dlpack(managed, false, &arrays[i]) != 0) {
      managed->deleter(managed);
      status = -1;
    }
    if (status != 0) {
      for (size_t made = 0; made < i; ++made) free_ndarray(arrays[made]);
      return status;
    }
  }
  return 0;
}
