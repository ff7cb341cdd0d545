// Fork-join Fibonacci with C++20 coroutine tasks.
//
//   build/examples/coroutine_fib [n]      (default n = 30)
//
// Every call with n >= 2 forks by continuation stealing: co_await
// canopy::join runs fib(n - 1) at once and leaves the rest of the join
// (launching fib(n - 2)) for an idle worker to steal; if none did, this
// worker launches it itself. The children cannot outlive the co_await.
#include <canopy/canopy.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

canopy::task<long> fib(int n) {
  if (n < 2) {
    co_return n;
  }
  auto [left, right] = co_await canopy::join(canopy::call(fib, n - 1), canopy::call(fib, n - 2));
  co_return left + right;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 30;
  canopy::executor pool;
  const auto start = std::chrono::steady_clock::now();
  const long value = canopy::block_on(pool, fib(n));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("coroutine fib(%d) = %ld in %.1f ms on %zu workers\n", n, value, ms,
              pool.worker_count());
  return 0;
}
