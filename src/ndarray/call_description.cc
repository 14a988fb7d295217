// A call's arrays and MXNet's modes described in one C call, for Python (ctypes).
//
// A block's call that repeats the latest call a graph served is served by the same
// graph when its arrays have the same shapes, dtypes and contexts and MXNet runs in
// the same modes (gluon_dyn/hybridize/call/cache_key.py, RepeatedCall). Read through
// MXNet's Python properties that is six C calls for one array (shape, dtype,
// context, whether autograd records and trains, NumPy shape semantics): a third of
// a small policy network's repeated call in REINFORCE's episode loop. Here it is one.
//
// The description, as int64 numbers: autograd's training mode, the NumPy shape
// semantics, then per array its dimension count, its dimensions, its dtype, its
// context's device type and id (-1 for an array without storage). Two calls whose
// descriptions are equal have arrays of the same shapes, dtypes and contexts under
// the same modes. Built against the mxnet wheel's own headers (see version.cc).
#include <cstddef>
#include <cstdint>

#include <mxnet/ndarray.h>

namespace {

// MXNet's C API functions reading its modes, given by gluon_dyn_use_mode_readers:
// this library is not linked against libmxnet.
int (*read_recording)(bool*) = nullptr;
int (*read_training)(bool*) = nullptr;
int (*read_np_shape)(int*) = nullptr;

// Calls `take(number)` for each number of the description of `count` arrays under
// the current modes, stopping where it returns false. Returns -1 where a mode
// could not be read, else 0; sets `*recording`.
template <typename Take>
int Describe(void* const* handles, size_t count, int* recording, Take take) {
  bool is_recording = false, is_training = false;
  int np_shape = 0;
  if (read_recording == nullptr || read_recording(&is_recording) != 0 ||
      read_training(&is_training) != 0 || read_np_shape(&np_shape) != 0) {
    return -1;
  }
  *recording = is_recording;
  if (!take(is_training) || !take(np_shape)) return 0;
  for (size_t i = 0; i < count; ++i) {
    const auto* array = static_cast<const mxnet::NDArray*>(handles[i]);
    const mxnet::TShape& shape = array->shape();
    const int ndim = shape.ndim();
    if (!take(ndim)) return 0;
    for (int d = 0; d < ndim; ++d) {
      if (!take(shape[d])) return 0;
    }
    if (!take(array->dtype())) return 0;
    const bool stored = !array->is_none();
    if (!take(stored ? static_cast<int64_t>(array->ctx().dev_type) : -1) ||
        !take(stored ? static_cast<int64_t>(array->ctx().dev_id) : -1)) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

extern "C" void gluon_dyn_use_mode_readers(int (*recording)(bool*), int (*training)(bool*),
                                           int (*np_shape)(int*)) {
  read_recording = recording;
  read_training = training;
  read_np_shape = np_shape;
}

// Writes the description into `out` (room for `capacity` numbers). Returns its
// length, which exceeds `capacity` where it did not fit (then `out` holds its
// start), or -1 where MXNet's modes could not be read.
extern "C" int64_t gluon_dyn_describe_call(void* const* handles, size_t count, int64_t* out,
                                           size_t capacity, int* recording) {
  size_t length = 0;
  const int failed = Describe(handles, count, recording, [&](int64_t number) {
    if (length < capacity) out[length] = number;
    ++length;
    return true;
  });
  return failed ? -1 : static_cast<int64_t>(length);
}

// 1 where the description of the call equals `expected` (`size` numbers), 0 where
// it does not, -1 where MXNet's modes could not be read; sets `*recording`.
extern "C" int gluon_dyn_call_matches(void* const* handles, size_t count, const int64_t* expected,
                                      size_t size, int* recording) {
  size_t length = 0;
  bool equal = true;
  const int failed = Describe(handles, count, recording, [&](int64_t number) {
    equal = length < size && expected[length] == number;
    ++length;
    return equal;
  });
  if (failed) return -1;
  return equal && length == size ? 1 : 0;
}
