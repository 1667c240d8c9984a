#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace edgelm {
namespace {

// Spin this many polls before sleeping in the kernel: long enough to cover the gap between two
// ops of a decode step (microseconds), short enough not to burn a core between tokens.
constexpr int kSpinPolls = 1 << 14;

// Every this many polls, a spinning thread yields its core: when the machine is oversubscribed the
// thread it waits for may be descheduled, and yielding lets it run instead of burning the slice.
constexpr int kPollsPerYield = 64;

inline void spin_pause(int spin) {
  if (spin % kPollsPerYield == kPollsPerYield - 1) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

thread_local const ThreadPool* tls_current_pool = nullptr;

// Pins the calling thread to one CPU (Linux and Android: sched_setaffinity on thread id 0 is the
// calling thread). Returns false when the kernel refuses (no such CPU, or not allowed).
bool pin_current_thread(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, std::vector<int> cpus)
    : n_threads_(n_threads), cpus_(std::move(cpus)) {
  EDGELM_CHECK(n_threads >= 1, "[thread_pool] thread count must be at least 1, got ", n_threads);
  cpu_set_t caller_affinity;
  if (!cpus_.empty()) {
    // The caller (thread 0) is pinned too; its previous affinity is restored on destruction.
    if (sched_getaffinity(0, sizeof(caller_affinity), &caller_affinity) != 0)
      EDGELM_FAIL("[thread_pool] cannot read the calling thread's CPU affinity");
    if (!pin_current_thread(cpus_[0])) {
      EDGELM_FAIL("[thread_pool] cannot pin thread 0 to CPU ", cpus_[0],
                  " (no such CPU, or not allowed)");
    }
    saved_affinity_ = caller_affinity;
    caller_pinned_ = true;
  }
  shares_ = std::make_unique<ChunkShare[]>(static_cast<size_t>(n_threads));
  done_ = std::make_unique<Done[]>(static_cast<size_t>(n_threads));
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  std::vector<int> failed(static_cast<size_t>(n_threads), -1);
  std::atomic<int> started{0};
  for (int i = 1; i < n_threads; ++i) {
    try {
      workers_.emplace_back([this, i, &failed, &started] {
        if (!cpus_.empty()) {
          const int cpu = cpus_[static_cast<size_t>(i) % cpus_.size()];
          if (!pin_current_thread(cpu)) failed[static_cast<size_t>(i)] = cpu;
        }
        started.fetch_add(1, std::memory_order_release);
        started.notify_one();
        worker_loop(i);
      });
    } catch (const std::exception& e) {
      // The system refused a thread (std::system_error: its thread or memory limit) or the
      // memory for its state (std::bad_alloc). The workers already running
      // must be joined before their std::thread objects go, or the process terminates.
      shut_down();
      EDGELM_FAIL("[thread_pool] cannot start thread ", i, " of ", n_threads, ": ", e.what(),
                  " (ask for fewer threads)");
    }
  }
  // Wait until every worker has pinned itself, so a refused CPU is reported here.
  for (int now = started.load(std::memory_order_acquire); now != n_threads - 1;
       now = started.load(std::memory_order_acquire)) {
    started.wait(now, std::memory_order_acquire);
  }
  for (int i = 1; i < n_threads; ++i) {
    if (failed[static_cast<size_t>(i)] >= 0) {
      const int cpu = failed[static_cast<size_t>(i)];
      shut_down();
      EDGELM_FAIL("[thread_pool] cannot pin thread ", i, " to CPU ", cpu,
                  " (no such CPU, or not allowed)");
    }
  }
}

ThreadPool::~ThreadPool() {
  shut_down();
}

void ThreadPool::shut_down() {
  dispatch_.stop.store(true, std::memory_order_relaxed);
  dispatch_.generation.store(dispatch_.generation.load(std::memory_order_relaxed) + 1,
                             std::memory_order_release);
  dispatch_.generation.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  if (caller_pinned_) {
    sched_setaffinity(0, sizeof(saved_affinity_), &saved_affinity_);
    caller_pinned_ = false;
  }
}

void ThreadPool::execute(int index) {
  try {
    dispatch_.function(dispatch_.context, index);
  } catch (...) {
    std::lock_guard<std::mutex> lock(failure_.mutex);
    if (!failure_.error) failure_.error = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  tls_current_pool = this;
  uint32_t seen = 0;
  for (;;) {
    std::atomic<uint32_t>& generation = dispatch_.generation;
    uint32_t now = generation.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinPolls; ++spin) {
      spin_pause(spin);
      now = generation.load(std::memory_order_acquire);
    }
    while (now == seen) {
      generation.wait(seen, std::memory_order_acquire);
      now = generation.load(std::memory_order_acquire);
    }
    seen = now;
    if (dispatch_.stop.load(std::memory_order_relaxed)) return;
    execute(index);
    std::atomic<uint32_t>& done = done_[static_cast<size_t>(index)].generation;
    done.store(seen, std::memory_order_release);
    done.notify_one();
  }
}

void ThreadPool::run_erased(void (*function)(void*, int), void* context) {
  EDGELM_CHECK(tls_current_pool != this, "[thread_pool] run() called from inside one of its tasks");
  std::lock_guard<std::mutex> lock(run_mutex_);
  run_locked(function, context);
}

void ThreadPool::run_chunks(int64_t chunks, void (*chunk_fn)(void*, int64_t, int64_t),
                            void* context, bool guided) {
  EDGELM_CHECK(tls_current_pool != this, "[thread_pool] run() called from inside one of its tasks");
  std::lock_guard<std::mutex> lock(run_mutex_);
  for (int i = 0; i < n_threads_; ++i) {
    const auto lo = static_cast<uint64_t>(chunks * i / n_threads_);
    const auto hi = static_cast<uint64_t>(chunks * (i + 1) / n_threads_);
    // Relaxed: the generation bump in run_locked publishes these to the workers.
    shares_[static_cast<size_t>(i)].bounds.store(lo | hi << 32, std::memory_order_relaxed);
  }
  dispatch_.chunk_fn = chunk_fn;
  dispatch_.chunk_context = context;
  dispatch_.guided = guided;
  run_locked([](void* pool, int index) { static_cast<ThreadPool*>(pool)->take_chunks(index); },
             this);
}

void ThreadPool::take_chunks(int index) {
  // Both halves of `bounds` stay within (-2^31, 2^31): chunks <= 2^30; only the owner moves lo, by
  // at most what was left of its share when it looked (lo + step <= hi then, so lo <= chunks);
  // and each thread's subtraction that finds a share empty (lo >= hi) is its last on that share.
  const auto low = [](uint64_t bounds) { return static_cast<int32_t>(bounds & 0xffffffffu); };
  const auto high = [](uint64_t bounds) { return static_cast<int32_t>(bounds >> 32); };
  std::atomic<uint64_t>& own = shares_[static_cast<size_t>(index)].bounds;
  for (;;) {
    int64_t step = 1;
    if (dispatch_.guided) {
      const uint64_t seen = own.load(std::memory_order_relaxed);
      if (low(seen) >= high(seen)) break;
      step = std::max<int64_t>(1, (int64_t{high(seen)} - low(seen)) / 2);
    }
    const uint64_t bounds = own.fetch_add(static_cast<uint64_t>(step), std::memory_order_relaxed);
    if (low(bounds) >= high(bounds)) break;
    dispatch_.chunk_fn(dispatch_.chunk_context, low(bounds),
                       std::min<int64_t>(low(bounds) + step, high(bounds)));
  }
  for (int k = 1; k < n_threads_; ++k) {
    std::atomic<uint64_t>& other = shares_[static_cast<size_t>((index + k) % n_threads_)].bounds;
    for (;;) {
      const uint64_t bounds = other.fetch_sub(uint64_t{1} << 32, std::memory_order_relaxed);
      if (high(bounds) <= low(bounds)) break;
      dispatch_.chunk_fn(dispatch_.chunk_context, high(bounds) - 1, high(bounds));
    }
  }
}

void ThreadPool::run_locked(void (*function)(void*, int), void* context) {
  const ThreadPool* previous_pool = tls_current_pool;  // the caller may be a task of another pool
  tls_current_pool = this;
  if (n_threads_ == 1) {
    try {
      function(context, 0);
    } catch (...) {
      tls_current_pool = previous_pool;
      throw;
    }
    tls_current_pool = previous_pool;
    return;
  }
  dispatch_.function = function;
  dispatch_.context = context;
  // A plain store, not a read-modify-write: on x86 a locked instruction would first wait for the
  // caller's earlier stores to reach their lines, some of them (the shares) held by the workers.
  const uint32_t generation = dispatch_.generation.load(std::memory_order_relaxed) + 1;
  dispatch_.generation.store(generation, std::memory_order_release);
  dispatch_.generation.notify_all();

  execute(0);
  tls_current_pool = previous_pool;

  int spin = 0;
  for (int i = 1; i < n_threads_; ++i) {
    std::atomic<uint32_t>& done = done_[static_cast<size_t>(i)].generation;
    uint32_t seen = done.load(std::memory_order_acquire);
    for (; seen != generation && spin < kSpinPolls; ++spin) {
      spin_pause(spin);
      seen = done.load(std::memory_order_acquire);
    }
    while (seen != generation) {
      done.wait(seen, std::memory_order_acquire);
      seen = done.load(std::memory_order_acquire);
    }
  }
  if (failure_.error) std::rethrow_exception(std::exchange(failure_.error, nullptr));
}

}  // namespace edgelm
