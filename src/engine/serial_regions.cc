// Engine functions that set the OpenMP threads of the operators between them:
// one thread (serial regions) or every core (wide regions).
//
// MXNet 1.9.1 runs an operator's kernels with an OpenMP team as wide as the
// engine thread's OpenMP thread count (omp_get_max_threads, capped by
// MXNET_OMP_MAX_THREADS). On arrays of a few hundred elements a team costs more
// than the kernel: waking the second thread of a 2-core machine, while the
// Python thread pushing the next graph holds the other core, put ~0.6 ms on
// every call of a small Tree-LSTM (gluon_dyn/threads.py). gluon_dyn pushes
// gluon_dyn_serial_begin before such a graph and gluon_dyn_serial_end after it
// (MXEnginePushSyncND, reading the graph's outputs), both on the engine thread
// that runs the graph. Begins and ends nest (graphs pushed back to back), so the
// thread count is saved at the outermost begin and given back at its end.
//
// A wide region is the opposite, for a training step whose operators are few and
// long (MXNet's fused RNN operator, 3.4 ms forward on one thread for a hidden-200
// LSTM over 35 steps): gluon_dyn_wide_begin gives the engine thread `*threads`
// (every core) until gluon_dyn_wide_end. Only operators that size their team by
// omp_get_max_threads (oneDNN's) widen: MXNet's own kernels stay capped by
// MXNET_OMP_MAX_THREADS's default. Wide regions do not nest: a begin inside one is
// ignored, and so is an end outside one.
//
// The functions are EngineSyncFunc: (RunContext, parameter); the RunContext unused.
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int);
}

namespace {
thread_local int serial_depth = 0;
thread_local int saved_threads = 0;
thread_local bool wide = false;
thread_local int threads_before_wide = 0;
}  // namespace

extern "C" void gluon_dyn_serial_begin(void*, void*) {
  if (serial_depth++ == 0) {
    saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
  }
}

extern "C" void gluon_dyn_serial_end(void*, void*) {
  if (serial_depth > 0 && --serial_depth == 0) omp_set_num_threads(saved_threads);
}

extern "C" void gluon_dyn_wide_begin(void*, void* threads) {
  if (wide) return;
  wide = true;
  threads_before_wide = omp_get_max_threads();
  omp_set_num_threads(*static_cast<const int*>(threads));
}

extern "C" void gluon_dyn_wide_end(void*, void*) {
  if (!wide) return;
  wide = false;
  omp_set_num_threads(threads_before_wide);
}

// The calling thread's OpenMP thread count (for tests: pushed as an engine
// function, it writes the engine thread's count into `*threads`).
extern "C" void gluon_dyn_omp_threads(void*, void* threads) {
  *static_cast<int*>(threads) = omp_get_max_threads();
}
