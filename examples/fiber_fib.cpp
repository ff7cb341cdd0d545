// Fork-join Fibonacci with Boost.Context fibers.
//
//   build/examples/fiber_fib [n] [stack KiB]      (default n = 30, 16 KiB stacks)
//
// Ordinary (non-coroutine) code: this_fiber::await() suspends only the
// fiber; the worker runs other tasks meanwhile.
#include <canopy/fiber.hpp>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace {

std::size_t stack_bytes = 16 * 1024;

long fib(int n) {
  if (n < 2) {
    return n;
  }
  auto left = canopy::spawn(canopy::fiber([n] { return fib(n - 1); }, stack_bytes));
  auto right = canopy::spawn(canopy::fiber([n] { return fib(n - 2); }, stack_bytes));
  return canopy::this_fiber::await(left) + canopy::this_fiber::await(right);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 30;
  if (argc > 2) {
    stack_bytes = static_cast<std::size_t>(std::atoi(argv[2])) * 1024;
  }
  canopy::executor pool;
  const auto start = std::chrono::steady_clock::now();
  const long value = pool.spawn(canopy::fiber([n] { return fib(n); }, stack_bytes)).get();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const canopy::stack_pool_stats stacks = canopy::stack_pool::stats();
  // Children that have not started by the join run on their parent's stack
  // and take none of their own, so few stacks are ever carved.
  std::printf(
      "fiber fib(%d) = %ld in %.1f ms on %zu workers; %zu stacks carved for %zu KiB "
      "fibers, %zu with guard pages\n",
      n, value, ms, pool.worker_count(), stacks.stacks, stack_bytes / 1024, stacks.guarded_stacks);
  return 0;
}
