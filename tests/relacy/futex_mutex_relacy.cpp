// Weak-memory check of atomics::futex_mutex (atomics/futex_mutex.hpp): the real
// lock under Relacy's simulation of the C++ memory model. Each thread takes
// the lock, reads and writes a Relacy variable the previous holders wrote
// (a read without a happens-before edge from their unlock is reported as a
// data race: the acquire/release pairing), and leaves. A lost wake-up shows
// as a deadlock (Relacy's futex never wakes spuriously), two holders at once
// as a failed assertion.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>

#include "atomics/atomics.hpp"  // first: Relacy, then its allocation macros taken back
#include "atomics/futex_mutex.hpp"

namespace {

constexpr int rounds = 2;

struct world {
  canopy::detail::atomics::futex_mutex mutex;
  rl::var<int> count;  // guarded by mutex
  canopy::detail::atomics::atomic<int> inside{0};

  world() { count($) = 0; }

  void lock_unlock() {
    for (int round = 0; round < rounds; ++round) {
      mutex.lock();
      RL_ASSERT(inside.fetch_add(1, canopy::detail::atomics::relaxed) == 0);
      count($) = count($) + 1;
      inside.fetch_sub(1, canopy::detail::atomics::relaxed);
      mutex.unlock();
    }
  }
};

template <std::size_t Threads>
struct mutex_suite : rl::test_suite<mutex_suite<Threads>, Threads> {
  std::optional<world> state;

  void before() { state.emplace(); }
  void thread(unsigned /*index*/) { state->lock_unlock(); }
  void after() {
    RL_ASSERT(state->count($) == static_cast<int>(Threads) * rounds);
    state.reset();
  }
};

int iterations() {
  const char* text = std::getenv("CANOPY_RELACY_ITERATIONS");  // NOLINT(concurrency-mt-unsafe)
  const int count = text != nullptr ? std::atoi(text) : 0;
  return count > 0 ? count : 100000;
}

template <std::size_t Threads>
bool check() {
  rl::test_params params;
  params.output_history = false;
  params.iteration_count = iterations();
  MESSAGE("relacy: futex_mutex, " << Threads << " lockers (" << params.iteration_count
                                  << " random schedules)");
  return rl::simulate<mutex_suite<Threads>>(params);
}

}  // namespace

TEST_CASE("relacy: futex_mutex, two lockers") { CHECK(check<2>()); }

TEST_CASE("relacy: futex_mutex, three lockers") { CHECK(check<3>()); }
