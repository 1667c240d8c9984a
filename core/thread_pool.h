// A persistent pool of worker threads with a cheap fork/join barrier. Dispatching work allocates
// nothing, so it can run every op of every decoded token.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace edgelm {

class ThreadPool {
 public:
  // `n_threads` counts the calling thread, which always takes part: ThreadPool(1) starts no worker.
  // With `cpus` given, thread i (the caller is 0) is pinned to cpus[i % cpus.size()] — e.g. the
  // big cores of a phone; the caller's pinning is undone when the pool is destroyed. Throws
  // edgelm::Error when n_threads < 1, or a CPU index is negative or refused by the kernel.
  explicit ThreadPool(int n_threads, std::vector<int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  const std::vector<int>& cpus() const { return cpus_; }

  // Runs task(thread_index) once on every thread (the caller is index 0) and returns when all have
  // finished. The first exception a task throws is rethrown here after the join. Calling run()
  // from inside a task of the same pool throws edgelm::Error (it would deadlock).
  template <class F>
  void run(F&& task) {
    using Fn = std::remove_reference_t<F>;
    run_erased([](void* context, int index) { (*static_cast<Fn*>(context))(index); },
               const_cast<void*>(static_cast<const void*>(&task)));
  }

  // Splits [0, n) into ranges of `chunk` (the last one shorter) and calls fn(begin, end) once for
  // each, balancing the threads as they go. Thread i owns the i-th contiguous share of the ranges
  // and takes them front to back, so each thread streams through memory without jumps; a thread
  // that runs out of its own takes ranges from the back of the others' shares, so one slowed by a
  // busy or descheduled core is left with less instead of holding the others at the barrier.
  // Which thread computes a range varies; the ranges themselves do not. A pool of one thread, or a
  // single chunk, runs fn(0, n) inline. More than 2^30 ranges are merged into larger ones.
  template <class F>
  void parallel_for_dynamic(int64_t n, F&& fn, int64_t chunk) {
    split_chunks(n, fn, chunk, /*guided=*/false);
  }

  // As parallel_for_dynamic, except that a thread takes its own share in claims of half of what
  // is left of it (at least one range), each passed to fn as one range: fn(begin, end) gets
  // consecutive ranges of `chunk` joined, front to back, about log2(ranges per thread) calls per
  // thread, while the others still take single ranges from the back. Each claim is an atomic
  // read-modify-write, which on x86 also waits for every load in flight: taken one range at a time,
  // 32 ranges per thread cost a two-thread decode matmul 5-8 us more than 8 with the weights in
  // cache (docs/performance.md), and fewer ranges leave the threads finishing further apart.
  template <class F>
  void parallel_for_guided(int64_t n, F&& fn, int64_t chunk) {
    split_chunks(n, fn, chunk, /*guided=*/true);
  }

  // Splits [0, n) into one contiguous range per thread, with range boundaries on multiples of
  // `grain`, and calls fn(begin, end) for each non-empty range. Small n runs inline.
  template <class F>
  void parallel_for(int64_t n, F&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    const int64_t units = (n + grain - 1) / grain;
    if (n_threads_ == 1 || units == 1) {
      fn(int64_t{0}, n);
      return;
    }
    run([&](int index) {
      const int64_t begin_unit = units * index / n_threads_;
      const int64_t end_unit = units * (index + 1) / n_threads_;
      const int64_t begin = begin_unit * grain;
      const int64_t end = end_unit * grain < n ? end_unit * grain : n;
      if (begin < end) fn(begin, end);
    });
  }

 private:
  static constexpr int64_t kMaxChunks = int64_t{1} << 30;

  // The chunks [lo, hi) of one thread's share not yet taken, packed as lo | hi << 32 so that the
  // owner (taking lo) and the others (taking hi - 1) claim with one atomic add each.
  struct alignas(64) ChunkShare {
    std::atomic<uint64_t> bounds{0};
  };

  void run_erased(void (*function)(void*, int), void* context);
  void run_locked(void (*function)(void*, int), void* context);
  template <class F>
  void split_chunks(int64_t n, F& fn, int64_t chunk, bool guided) {
    if (n <= 0) return;
    chunk = chunk < 1 ? 1 : chunk;
    if ((n - 1) / chunk >= kMaxChunks) chunk = (n + kMaxChunks - 1) / kMaxChunks;
    const int64_t chunks = (n + chunk - 1) / chunk;
    if (n_threads_ == 1 || chunks == 1) {
      fn(int64_t{0}, n);
      return;
    }
    auto ranges = [&](int64_t first, int64_t last) {
      const int64_t end = last * chunk;
      fn(first * chunk, end < n ? end : n);
    };
    using Fn = decltype(ranges);
    run_chunks(
        chunks,
        [](void* context, int64_t first, int64_t last) {
          (*static_cast<Fn*>(context))(first, last);
        },
        &ranges, guided);
  }
  // Calls chunk_fn(context, first, last) for chunks [first, last) (see take_chunks).
  void run_chunks(int64_t chunks, void (*chunk_fn)(void*, int64_t, int64_t), void* context,
                  bool guided);
  void take_chunks(int index);
  void shut_down();
  void worker_loop(int index);
  void execute(int index);

  int n_threads_;
  std::vector<int> cpus_;
  bool caller_pinned_ = false;
  cpu_set_t saved_affinity_{};  // the caller's affinity before pinning
  std::vector<std::thread> workers_;
  std::unique_ptr<ChunkShare[]> shares_;  // one per thread, for run_chunks
  std::mutex run_mutex_;                  // one run() at a time from outside threads

  // A dispatch is handed over in one cache line written by the caller alone, and each worker
  // reports its end in a line of its own: so a fork/join moves about two lines between the cores
  // each way. When the fields shared lines with the caller's mutex, the counter of unfinished
  // workers and the error slot, the caller and the workers took lines from each other several
  // times per dispatch, each a wait of a cross-core transfer (docs/performance.md).
  struct alignas(64) Dispatch {
    std::atomic<uint32_t> generation{0};  // bumped by a plain store: only the caller writes it
    std::atomic<bool> stop{false};
    bool guided = false;
    void (*function)(void*, int) = nullptr;
    void* context = nullptr;
    void (*chunk_fn)(void*, int64_t, int64_t) = nullptr;
    void* chunk_context = nullptr;
  };
  struct alignas(64) Done {
    std::atomic<uint32_t> generation{0};  // the last dispatch this worker finished
  };
  struct alignas(64) Failure {
    std::mutex mutex;
    std::exception_ptr error;  // the first exception of the current dispatch
  };
  Dispatch dispatch_;
  std::unique_ptr<Done[]> done_;  // one per thread (index 0, the caller, unused)
  Failure failure_;
};

}  // namespace edgelm
