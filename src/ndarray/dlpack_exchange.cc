// MXNet NDArrays handed to TVM and TVM's results handed back, sharing memory through
// DLPack, one C call each way, for Python (ctypes): tvm_bridge/ndarray_exchange.py.
//
// tvm_bridge views each input array of a compiled function as a TVM tensor and
// makes each result an NDArray. Through MXNet's and TVM's Python APIs that is five
// C calls an input (the context, a wait for pending writes, the data address TVM's
// alignment is checked on, a second wait, the DLPack export) and six a result (the
// export and five capsule and MXNet calls): a fifth of a small policy network's
// call in REINFORCE's episode loop. gluon_dyn_call_tvm does a whole call of a
// compiled function in one C call: the inputs' views, the check of its prepared
// parameters, the call and its results as NDArrays.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>
#include <mxnet/ndarray.h>

extern "C" int gluon_dyn_ndarrays_of_tvm(void* const* tensors, size_t count, void** arrays);
extern "C" int gluon_dyn_ndarray_versions(void** handles, size_t count, size_t* versions,
                                          int (*wait_to_read)(void*));

namespace {

// MXNet's and TVM's C API functions, given by gluon_dyn_use_exchange_functions:
// this library is linked against neither.
int (*wait_to_read)(void*) = nullptr;
int (*get_data)(void*, void**) = nullptr;
int (*to_dlpack)(void*, void**) = nullptr;
int (*from_dlpack)(void*, bool, void**) = nullptr;
int (*free_ndarray)(void*) = nullptr;
int (*tvm_to_dlpack)(void*, DLManagedTensor**) = nullptr;
int (*tvm_from_dlpack)(DLManagedTensor*, int32_t, int32_t, void**) = nullptr;
int (*tvm_call)(void*, void*, int32_t, void*) = nullptr;
int (*tvm_dec_ref)(void*) = nullptr;
void (*tvm_take_error)(void**) = nullptr;

// The parts of tvm-ffi's C ABI (tvm/ffi/c_api.h of apache-tvm-ffi) gluon_dyn_call_tvm
// uses, declared here: this library builds without TVM, which is optional.
// ndarray_exchange.py checks them when it loads, by a call of tvm-ffi's "ffi.Array".
struct TvmAny {  // TVMFFIAny: a type index, 4 bytes of padding, a value or object
  int32_t type_index;
  uint32_t zero_padding;
  void* object;
};
struct TvmObjectHeader {  // TVMFFIObject, which every object starts with
  uint64_t combined_ref_count;
  int32_t type_index;
  uint32_t padding;
  void* deleter;
};
struct TvmSequence {  // TVMFFISeqCell: an Array's elements, after its header
  TvmAny* data;
  int64_t size;
  int64_t capacity;
  void (*data_deleter)(void*);
};
// TVMFFITypeIndex: objects are counted references from kTvmStaticObjectBegin on.
constexpr int32_t kTvmNone = 0, kTvmStaticObjectBegin = 64, kTvmTensor = 70, kTvmArray = 71;

// Clears the error TVM raised (the caller's own path raises it again, readably).
void drop_tvm_error() {
  void* error = nullptr;
  tvm_take_error(&error);
  if (error != nullptr) tvm_dec_ref(error);
}

// The tensors `tensors` (TVM objects, borrowed) as new NDArrays in `arrays`, as
// gluon_dyn_ndarrays_of_tvm makes them (same returns).
int arrays_of_tensors(const TvmAny* tensors, size_t count, void** arrays) {
  for (size_t i = 0; i < count; ++i) {
    if (tensors[i].type_index != kTvmTensor) return 1;
  }
  std::vector<void*> handles(count);
  for (size_t i = 0; i < count; ++i) handles[i] = tensors[i].object;
  return gluon_dyn_ndarrays_of_tvm(handles.data(), count, arrays);
}

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

// tvm-ffi's TVMFFITensorFromDLPack, TVMFFIFunctionCall, TVMFFIObjectDecRef and
// TVMFFIErrorMoveFromRaised, for gluon_dyn_call_tvm.
extern "C" void gluon_dyn_use_tvm_call_functions(
    int (*from_dlpack_function)(DLManagedTensor*, int32_t, int32_t, void**),
    int (*call_function)(void*, void*, int32_t, void*), int (*dec_ref)(void*),
    void (*take_error)(void**)) {
  tvm_from_dlpack = from_dlpack_function;
  tvm_call = call_function;
  tvm_dec_ref = dec_ref;
  tvm_take_error = take_error;
}

// Calls the TVM function `function` (a TVMFFIObjectHandle) on the arrays `data`
// (NDArrayHandles, viewed as gluon_dyn_ndarray_cpu_view views them, at `alignment`)
// followed by the TVM objects `prepared` (passed as they are), and sets `results` to
// `num_results` new NDArrays (the caller owns them) sharing the memory of its results:
// the tensors of the Array it returns where `returns_tuple`, else its one tensor.
// First checks that the arrays `parameters` have the versions `versions` (as
// gluon_dyn_ndarray_versions reads them). Returns 0 when done; 1 when the caller's own
// path is to serve the call, nothing made: a data array it cannot view (not on the
// CPU, or not at an `alignment` multiple), a parameter written since, TVM failing (its
// error dropped: the caller's path raises it with its context) or results other than
// `num_results` tensors; -1 where MXNet failed (its last error says why).
extern "C" int gluon_dyn_call_tvm(void* function, void* const* data, size_t num_data,
                                  uint64_t alignment, void** parameters,
                                  const size_t* versions, size_t num_parameters,
                                  void* const* prepared, size_t num_prepared, int returns_tuple,
                                  size_t num_results, void** results) {
  std::vector<size_t> read(num_parameters);
  if (gluon_dyn_ndarray_versions(parameters, num_parameters, read.data(), wait_to_read) != 0) {
    return -1;
  }
  for (size_t i = 0; i < num_parameters; ++i) {
    if (read[i] != versions[i]) return 1;
  }
  std::vector<TvmAny> args(num_data + num_prepared);
  size_t viewed = 0;
  int status = 0;
  for (; viewed < num_data; ++viewed) {
    void* address = nullptr;
    void* managed = nullptr;
    status = gluon_dyn_ndarray_cpu_view(data[viewed], alignment, &address, &managed);
    if (status != 0) break;
    if (managed == nullptr) {  // unaligned: the caller's path copies it
      status = 1;
      break;
    }
    auto* tensor = static_cast<DLManagedTensor*>(managed);
    if (tvm_from_dlpack(tensor, static_cast<int32_t>(alignment), 1, &args[viewed].object) != 0) {
      drop_tvm_error();
      tensor->deleter(tensor);
      status = 1;
      break;
    }
    args[viewed].type_index = kTvmTensor;
  }
  if (status == 0) {
    for (size_t i = 0; i < num_prepared; ++i) {
      args[num_data + i].type_index = static_cast<const TvmObjectHeader*>(prepared[i])->type_index;
      args[num_data + i].object = prepared[i];
    }
    TvmAny result{kTvmNone, 0, nullptr};
    if (tvm_call(function, args.data(), static_cast<int32_t>(args.size()), &result) != 0) {
      drop_tvm_error();
      status = 1;
    } else if (returns_tuple) {
      status = 1;
      if (result.type_index == kTvmArray) {
        const auto* sequence = reinterpret_cast<const TvmSequence*>(
            static_cast<const char*>(result.object) + sizeof(TvmObjectHeader));
        if (sequence->size == static_cast<int64_t>(num_results)) {
          status = arrays_of_tensors(sequence->data, num_results, results);
        }
      }
    } else {
      status = num_results != 1 ? 1 : arrays_of_tensors(&result, 1, results);
    }
    if (result.type_index >= kTvmStaticObjectBegin) tvm_dec_ref(result.object);
  }
  for (size_t i = 0; i < viewed; ++i) tvm_dec_ref(args[i].object);
  return status;
}
