// A program that uses an installed Canopy the way a user's would: it names
// only <canopy/...> headers and links only "canopy" (pkg-config, CMake
// canopy::canopy, or meson dependency('canopy')), with no fiber and so no
// Boost. tests/consumer/run.sh builds it three ways and checks what it
// prints; fiber_app.cpp is the same for "canopy-fiber".
#include <canopy/canopy.hpp>
#include <canopy/io.hpp>  // not used below: checks that the I/O headers install whole
#include <cstdio>

namespace {

canopy::task<long> fib(int n) {
  if (n < 2) {
    co_return n;
  }
  auto left = canopy::spawn(fib(n - 1));
  auto right = canopy::spawn(fib(n - 2));
  co_return co_await left + co_await right;
}

canopy::task<long> leaf(int n) { co_return n; }
canopy::task<int> scratch() { co_return 0; }

// A fork-join whose first call makes and drops a scratch task of another
// result type before its own: canopy::call's contract allows that. The
// headers decide per compiler whether a call's child starts as it is made;
// run.sh also builds this file with clang++ against the library g++ built.
canopy::task<long> fork_join_sum() {
  auto [left, right] = co_await canopy::join(canopy::call(
                                                 [](int n) {
                                                   { const canopy::task<int> dropped = scratch(); }
                                                   return leaf(n);
                                                 },
                                                 3),
                                             canopy::call(leaf, 4));
  co_return left + right;
}

}  // namespace

int main() {
  canopy::executor_config config;
  config.worker_count = 2;
  canopy::executor pool(config);
  const long coroutine = canopy::block_on(pool, fib(20));
  const long forked = canopy::block_on(pool, fork_join_sum());
  const int callable = pool.spawn([] { return 7; }).get();
  const auto [left, right] = canopy::join(
      pool, [] { return 1; }, [] { return 2; });
  pool.shutdown();
  std::printf("canopy consumer: fib(20) = %ld, callable 7 = %d, join 3 = %d, fork-join 7 = %ld\n",
              coroutine, callable, left + right, forked);
  return coroutine == 6765 && callable == 7 && left + right == 3 && forked == 7 ? 0 : 1;
}
