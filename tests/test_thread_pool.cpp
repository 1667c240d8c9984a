// The fork/join thread pool: every thread runs once per dispatch, ranges cover their domain exactly
// once, errors come back to the caller, and the barrier survives many back-to-back dispatches.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/thread_pool.h"

namespace edgelm {
namespace {

constexpr int kPoolSizes[] = {1, 2, 3, 4, 8};

// Under ThreadSanitizer every atomic and spin poll is instrumented, and the 100,000 back-to-back
// rounds ran past ten minutes on two busy vCPUs (2,000 took 94 s there), so that test runs 1/50 of
// its rounds there: still thousands of hand-offs for the sanitizer to watch.
#if defined(__SANITIZE_THREAD__)
constexpr int kRoundsDivisor = 50;
#else
constexpr int kRoundsDivisor = 1;
#endif

TEST(ThreadPoolTest, RejectsFewerThanOneThread) {
  EXPECT_THROW(ThreadPool(0), Error);
  EXPECT_THROW(ThreadPool(-3), Error);
}

TEST(ThreadPoolTest, RunExecutesOnEveryThreadOnceWithDistinctIndices) {
  for (const int n_threads : kPoolSizes) {
    ThreadPool pool(n_threads);
    EXPECT_EQ(pool.size(), n_threads);
    for (int repeat = 0; repeat < 20; ++repeat) {
      std::vector<std::atomic<int>> calls(static_cast<size_t>(n_threads));
      std::vector<std::thread::id> ids(static_cast<size_t>(n_threads));
      pool.run([&](int index) {
        ASSERT_GE(index, 0);
        ASSERT_LT(index, n_threads);
        calls[index].fetch_add(1);
        ids[index] = std::this_thread::get_id();
      });
      for (int i = 0; i < n_threads; ++i) {
        ASSERT_EQ(calls[i].load(), 1) << "pool of " << n_threads << ", index " << i;
      }
      // The caller takes index 0; each worker is a thread of its own.
      EXPECT_EQ(ids[0], std::this_thread::get_id());
      for (int i = 0; i < n_threads; ++i) {
        for (int j = i + 1; j < n_threads; ++j) {
          EXPECT_NE(ids[i], ids[j]) << "pool of " << n_threads << ", indices " << i << ", " << j;
        }
      }
    }
  }
}

TEST(ThreadPoolTest, SingleThreadPoolRunsInline) {
  ThreadPool pool(1);
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  pool.run([&](int index) {
    EXPECT_EQ(index, 0);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++calls;
  });
  EXPECT_EQ(calls, 1);

  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(1000, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ranges.emplace_back(begin, end);
  });
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0], (std::pair<int64_t, int64_t>{0, 1000}));
}

TEST(ThreadPoolTest, ParallelForCoversTheRangeExactlyOnce) {
  const int64_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 13, 31, 97, 1000, 4099, 65537};
  const int64_t grains[] = {1, 3, 16, 64, 1000};
  for (const int n_threads : kPoolSizes) {
    ThreadPool pool(n_threads);
    for (const int64_t n : sizes) {
      for (const int64_t grain : grains) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> calls{0};
        std::atomic<bool> bad_range{false};
        pool.parallel_for(
            n,
            [&](int64_t begin, int64_t end) {
              calls.fetch_add(1);
              // Ranges are non-empty, inside [0, n), and start on a multiple of the grain.
              if (!(0 <= begin && begin < end && end <= n && begin % grain == 0)) bad_range = true;
              for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
            },
            grain);
        ASSERT_FALSE(bad_range.load()) << "pool " << n_threads << " n " << n << " grain " << grain;
        ASSERT_LE(calls.load(), n_threads);
        if (n == 0) {
          ASSERT_EQ(calls.load(), 0);
        }
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[i].load(), 1)
              << "pool " << n_threads << " n " << n << " grain " << grain << " element " << i;
        }
      }
    }
  }
}

// Runs the dynamic or the guided split over sizes and chunks, on every pool size, and checks that
// every index is covered once by ranges that begin on a multiple of the chunk. The dynamic split
// hands out exactly the ranges [c·chunk, min((c+1)·chunk, n)), one call each; the guided split
// joins consecutive ones (a range ends on a multiple of the chunk or at n), with no more calls
// than chunks. One thread, or a single chunk, is one call for [0, n).
void check_split_coverage(bool guided) {
  const int64_t sizes[] = {0, 1, 2, 7, 64, 97, 1000, 4099};
  const int64_t chunks[] = {0, 1, 3, 16, 64, 5000};
  for (const int n_threads : kPoolSizes) {
    ThreadPool pool(n_threads);
    for (const int64_t n : sizes) {
      for (const int64_t chunk : chunks) {
        const int64_t step = std::max<int64_t>(chunk, 1);
        const int64_t n_chunks = (n + step - 1) / step;
        const bool single = n_threads == 1 || n_chunks <= 1;
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> calls{0};
        std::atomic<bool> bad_range{false};
        auto fn = [&](int64_t begin, int64_t end) {
          calls.fetch_add(1);
          const bool shaped = single   ? begin == 0 && end == n
                              : guided ? begin % step == 0 && (end % step == 0 || end == n)
                                       : begin % step == 0 && (end - begin == step || end == n);
          if (!(0 <= begin && begin < end && end <= n && shaped)) bad_range = true;
          for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        };
        if (guided) {
          pool.parallel_for_guided(n, fn, chunk);
        } else {
          pool.parallel_for_dynamic(n, fn, chunk);
        }
        ASSERT_FALSE(bad_range.load()) << "pool " << n_threads << " n " << n << " chunk " << chunk;
        if (single || !guided) {
          ASSERT_EQ(calls.load(), single ? (n > 0 ? 1 : 0) : n_chunks) << "one call per chunk";
        } else {
          ASSERT_LE(calls.load(), n_chunks);
        }
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "element " << i;
      }
    }
  }
}

// A thread held up inside a range leaves the rest of the dynamic split to the others.
TEST(ThreadPoolTest, ParallelForDynamicCoversTheRangeInFixedChunks) {
  check_split_coverage(/*guided=*/false);
  // The caller stuck in the first range of its share: the worker takes its own share front to
  // back, then every range left in the caller's from the back (had the worker taken all 64 before
  // the caller asked, the caller takes none).
  ThreadPool pool(2);
  std::atomic<int> stuck_calls{0};
  std::atomic<int> done{0};
  std::vector<int64_t> worker_order;  // written by the worker only, read after the join
  const std::thread::id caller = std::this_thread::get_id();
  pool.parallel_for_dynamic(
      64,
      [&](int64_t begin, int64_t) {
        if (std::this_thread::get_id() == caller) {
          stuck_calls.fetch_add(1);
          while (done.load() < 63) std::this_thread::yield();
          return;
        }
        worker_order.push_back(begin);
        done.fetch_add(1);
      },
      1);
  EXPECT_LE(stuck_calls.load(), 1);
  EXPECT_EQ(stuck_calls.load() + done.load(), 64);
  std::vector<int64_t> expected;
  for (int64_t c = 32; c < 64; ++c) expected.push_back(c);
  for (int64_t c = 31; c >= (stuck_calls.load() == 1 ? 1 : 0); --c) expected.push_back(c);
  EXPECT_EQ(worker_order, expected);
}

TEST(ThreadPoolTest, ParallelForGuidedCoversTheRangeInJoinedChunks) {
  check_split_coverage(/*guided=*/true);
}

// A thread claims half of what is left of its own share at a time. The caller stuck in its first
// claim (ranges [0, 16) of its share [0, 32)): the worker takes its own share [32, 64) as 16, 8,
// 4, 2, 1, 1 ranges front to back, then the ranges left in the caller's share one at a time from
// the back.
TEST(ThreadPoolTest, ParallelForGuidedClaimsHalfOfWhatIsLeft) {
  // The worker's first call waits for the caller's first claim, so the order is fixed.
  ThreadPool pool(2);
  std::atomic<bool> caller_started{false};
  std::atomic<bool> worker_done{false};
  std::vector<std::pair<int64_t, int64_t>> worker_calls;  // by the worker only, read after the join
  std::vector<std::pair<int64_t, int64_t>> caller_calls;
  const std::thread::id caller = std::this_thread::get_id();
  pool.parallel_for_guided(
      64,
      [&](int64_t begin, int64_t end) {
        if (std::this_thread::get_id() == caller) {
          caller_calls.emplace_back(begin, end);
          caller_started = true;
          while (!worker_done.load()) std::this_thread::yield();
          return;
        }
        while (!caller_started.load()) std::this_thread::yield();
        worker_calls.emplace_back(begin, end);
        if (begin == 16) worker_done = true;  // the caller's last range left
      },
      1);
  ASSERT_EQ(caller_calls.front(), (std::pair<int64_t, int64_t>{0, 16}));
  ASSERT_EQ(caller_calls.size(), 1u);
  std::vector<std::pair<int64_t, int64_t>> expected = {{32, 48}, {48, 56}, {56, 60},
                                                       {60, 62}, {62, 63}, {63, 64}};
  for (int64_t c = 31; c >= 16; --c) expected.emplace_back(c, c + 1);
  EXPECT_EQ(worker_calls, expected);
}

// Thread i owns the i-th share of the ranges, [chunks·i/T, chunks·(i+1)/T): it takes them going
// forward from the share's start, so its reads stream without jumps, and only then takes ranges
// from other shares, each going backward from the share's end. So in every thread's order, the
// ranges taken from one share run either forward from its start (once, first, and share 0 for
// the caller) or strictly backward, and the caller begins with range 0 unless the others took
// its whole share first.
TEST(ThreadPoolTest, ParallelForDynamicThreadsStreamTheirOwnShareForward) {
  for (const int n_threads : kPoolSizes) {
    if (n_threads == 1) continue;
    ThreadPool pool(n_threads);
    for (int round = 0; round < 20; ++round) {
      const int64_t n = 40 * n_threads + round;
      const auto share_of = [&](int64_t c) {
        int share = 0;
        while (c >= n * (share + 1) / n_threads) ++share;
        return share;
      };
      std::mutex mutex;
      std::vector<std::pair<std::thread::id, int64_t>> taken;
      pool.parallel_for_dynamic(
          n,
          [&](int64_t begin, int64_t) {
            std::lock_guard<std::mutex> lock(mutex);
            taken.emplace_back(std::this_thread::get_id(), begin);
          },
          1);
      ASSERT_EQ(taken.size(), static_cast<size_t>(n));
      std::vector<std::thread::id> threads;
      for (const auto& [thread, begin] : taken) {
        if (std::find(threads.begin(), threads.end(), thread) == threads.end())
          threads.push_back(thread);
      }
      for (const std::thread::id thread : threads) {
        std::vector<int64_t> order;
        for (const auto& [t, begin] : taken) {
          if (t == thread) order.push_back(begin);
        }
        const bool caller = thread == std::this_thread::get_id();
        // Unless others took all of it first, the caller starts at the front of its share.
        if (caller &&
            std::any_of(order.begin(), order.end(), [&](int64_t c) { return share_of(c) == 0; })) {
          EXPECT_EQ(order[0], 0) << "pool " << n_threads << " n " << n;
        }
        for (size_t start = 0; start < order.size();) {
          const int share = share_of(order[start]);
          size_t end = start + 1;
          while (end < order.size() && share_of(order[end]) == share) ++end;
          const bool forward = order[start] == n * share / n_threads &&
                               (end - start == 1 || order[start + 1] == order[start] + 1);
          for (size_t i = start + 1; i < end; ++i) {
            if (forward) {
              EXPECT_EQ(order[i], order[i - 1] + 1) << "pool " << n_threads << " n " << n;
            } else {
              EXPECT_LT(order[i], order[i - 1]) << "pool " << n_threads << " n " << n;
            }
          }
          if (forward && end - start > 1) {
            EXPECT_EQ(start, 0u) << "a thread's own share comes first";
            if (caller) {
              EXPECT_EQ(share, 0) << "the caller owns the first share";
            }
          }
          start = end;
        }
      }
    }
  }
}

TEST(ThreadPoolTest, ParallelForUsesEveryThreadWhenThereIsEnoughWork) {
  ThreadPool pool(4);
  std::mutex mutex;
  std::vector<std::thread::id> seen;
  pool.parallel_for(4000, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(seen.size(), 4u);
  for (size_t i = 0; i < seen.size(); ++i) {
    for (size_t j = i + 1; j < seen.size(); ++j) EXPECT_NE(seen[i], seen[j]);
  }
}

// The barrier is crossed twice per dispatch; a lost wake-up or a worker running a stale generation
// shows up as a hang or a wrong total here. Pools larger than the machine get far fewer rounds: a
// dispatch then costs about a millisecond, as spinning workers wait to be scheduled.
TEST(ThreadPoolTest, ManyBackToBackDispatches) {
  struct Case {
    int n_threads;
    int rounds;
  };
  for (const Case c : {Case{2, 100000 / kRoundsDivisor}, Case{3, 400}, Case{8, 200}}) {
    ThreadPool pool(c.n_threads);
    std::atomic<int64_t> run_total{0};
    int64_t for_total = 0;
    std::atomic<int64_t> for_sum{0};
    for (int round = 0; round < c.rounds; ++round) {
      if (round % 2 == 0) {
        pool.run([&](int index) { run_total.fetch_add(index + 1, std::memory_order_relaxed); });
      } else {
        const int64_t n = 2 + round % 7;
        for_total += n * (n - 1) / 2;
        pool.parallel_for(n, [&](int64_t begin, int64_t end) {
          int64_t sum = 0;
          for (int64_t i = begin; i < end; ++i) sum += i;
          for_sum.fetch_add(sum, std::memory_order_relaxed);
        });
      }
    }
    const int64_t runs = (c.rounds + 1) / 2;
    EXPECT_EQ(run_total.load(), runs * c.n_threads * (c.n_threads + 1) / 2)
        << "pool of " << c.n_threads;
    EXPECT_EQ(for_sum.load(), for_total) << "pool of " << c.n_threads;
  }
}

// `thrower` is the index of the thread that throws; -1 for all of them.
void expect_rethrown_and_pool_usable(ThreadPool& pool, int thrower) {
  const auto task = [thrower](int index) {
    if (thrower == -1 || index == thrower) throw std::runtime_error("task failed");
  };
  EXPECT_THROW(pool.run(task), std::runtime_error)
      << "pool of " << pool.size() << ", thrower " << thrower;
  std::atomic<int> calls{0};
  pool.run([&](int) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), pool.size()) << "after a throw from " << thrower;
}

TEST(ThreadPoolTest, ExceptionsAreRethrownAndThePoolStaysUsable) {
  for (const int n_threads : kPoolSizes) {
    ThreadPool pool(n_threads);
    expect_rethrown_and_pool_usable(pool, 0);  // the caller's own share
    if (n_threads > 1) expect_rethrown_and_pool_usable(pool, n_threads - 1);  // a worker
    expect_rethrown_and_pool_usable(pool, -1);
    // An error of one dispatch is not reported again by the next.
    EXPECT_NO_THROW(pool.run([](int) {}));
  }
}

TEST(ThreadPoolTest, ErrorsKeepTheirType) {
  ThreadPool pool(2);
  const auto worker_fails = [](int index) {
    if (index == 1) EDGELM_FAIL("[test] worker ", index);
  };
  EXPECT_THROW(pool.run(worker_fails), Error);
  const auto second_half_fails = [](int64_t begin, int64_t) {
    if (begin > 0) throw std::out_of_range("second half");
  };
  EXPECT_THROW(pool.parallel_for(100, second_half_fails), std::out_of_range);
}

TEST(ThreadPoolTest, RunFromInsideATaskThrows) {
  for (const int n_threads : kPoolSizes) {
    ThreadPool pool(n_threads);
    std::atomic<int> nested_threw{0};
    pool.run([&](int) {
      try {
        pool.run([](int) {});
      } catch (const Error&) {
        nested_threw.fetch_add(1);
      }
    });
    EXPECT_EQ(nested_threw.load(), n_threads) << "pool of " << n_threads;
    // Uncaught, it reaches the outer caller as an Error, and the pool still works afterwards.
    EXPECT_THROW(pool.run([&](int) { pool.run([](int) {}); }), Error);
    std::atomic<int> calls{0};
    pool.run([&](int) { calls.fetch_add(1); });
    EXPECT_EQ(calls.load(), n_threads);
  }
}

TEST(ThreadPoolTest, TasksMayDispatchToAnotherPool) {
  ThreadPool outer(2);
  ThreadPool inner(3);
  std::atomic<int> calls{0};
  outer.run([&](int) { inner.run([&](int) { calls.fetch_add(1); }); });
  EXPECT_EQ(calls.load(), 2 * 3);
  // The caller is back outside both pools, so dispatching to either is allowed again.
  EXPECT_NO_THROW(outer.run([](int) {}));
  EXPECT_NO_THROW(inner.run([](int) {}));
}

// Pinning: each thread runs on its listed CPU only, the caller's affinity comes back when the pool
// goes, and a CPU that does not exist is an error naming it.
TEST(ThreadPoolTest, PinsThreadsToTheListedCpus) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  std::vector<int> allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE && allowed.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &before)) allowed.push_back(cpu);
  }
  ASSERT_FALSE(allowed.empty());
  {
    // Three threads over the list: thread 2 wraps around to the first CPU.
    ThreadPool pool(3, allowed);
    std::vector<int> pinned_to(3, -1);
    pool.run([&](int index) {
      cpu_set_t mine;
      if (sched_getaffinity(0, sizeof(mine), &mine) != 0 || CPU_COUNT(&mine) != 1) return;
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &mine)) pinned_to[static_cast<size_t>(index)] = cpu;
      }
    });
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(pinned_to[static_cast<size_t>(i)], allowed[static_cast<size_t>(i) % allowed.size()])
          << "thread " << i;
    }
  }
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "the caller's affinity was not restored";

  try {
    ThreadPool pool(2, {allowed[0], 4000});
    FAIL() << "pinning to CPU 4000 did not fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU 4000"), std::string::npos) << e.what();
  }
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "a failed pool left the caller pinned";
}

// The system can refuse a thread (a thread limit, or no address space for its stack). The pool then
// joins the workers it already started and throws an error that says so; before, the half-built
// pool's std::thread objects ended the process with std::terminate. A child process gets an
// address-space limit with room for a few thread stacks only, then asks for 1024 threads.
TEST(ThreadPoolTest, ARefusedThreadIsAnErrorNotATermination) {
  enum Outcome { kError = 3, kNoError = 4, kWrongMessage = 5, kNoLimit = 6, kSetupFailed = 7 };
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    long pages_in_use = 0;
    std::ifstream("/proc/self/statm") >> pages_in_use;
    rlimit limit{};
    if (pages_in_use <= 0 || getrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(kSetupFailed);
    limit.rlim_cur =
        static_cast<rlim_t>(pages_in_use) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) +
        (64u << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(kSetupFailed);
    // qemu-user accepts the call but does not apply it to the emulated program.
    void* probe = mmap(nullptr, size_t{256} << 20, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe != MAP_FAILED) std::_Exit(kNoLimit);
    try {
      ThreadPool pool(1024);
    } catch (const Error& e) {
      const std::string message = e.what();
      std::fprintf(stderr, "%s\n", message.c_str());
      std::_Exit(message.find("[thread_pool] cannot start thread") != std::string::npos &&
                         message.find("of 1024") != std::string::npos
                     ? kError
                     : kWrongMessage);
    }
    std::_Exit(kNoError);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kNoLimit) {
    GTEST_SKIP() << "this system does not apply RLIMIT_AS (e.g. under qemu-user)";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << WTERMSIG(status)
                                 << " (std::terminate aborts)";
  EXPECT_EQ(WEXITSTATUS(status), kError)
      << "3: the pool threw the error; 4: 1024 threads fitted under the limit; 5: another "
         "message; 7: the limit could not be set";
}

}  // namespace
}  // namespace edgelm
