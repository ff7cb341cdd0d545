// The README's example, compiled and run by the build so that it stays true.

#include <canopy/canopy.hpp>

canopy::task<long> fib(int n) {
  if (n < 2) co_return n;
  auto left = canopy::spawn(fib(n - 1));      // a child task, offered to idle workers
  auto right = canopy::spawn(fib(n - 2));
  co_return co_await left + co_await right;   // value (or rethrow); runs an untaken child here
}

int main() {
  canopy::executor pool;                      // one worker per hardware thread
  long value = canopy::block_on(pool, fib(30));   // 832040; from a non-worker thread

  auto handle = pool.spawn([] { return 6 * 7; }); // plain callables are tasks too
  int answer = handle.get();                      // 42, or rethrows

  pool.shutdown();                            // drain, join the workers (also in ~executor)
  return value == 832040 && answer == 42 ? 0 : 1;
}
