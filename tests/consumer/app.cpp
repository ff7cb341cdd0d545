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

}  // namespace

int main() {
  canopy::executor_config config;
  config.worker_count = 2;
  canopy::executor pool(config);
  const long coroutine = canopy::block_on(pool, fib(20));
  const int callable = pool.spawn([] { return 7; }).get();
  const auto [left, right] = canopy::join(
      pool, [] { return 1; }, [] { return 2; });
  pool.shutdown();
  std::printf("canopy consumer: fib(20) = %ld, callable 7 = %d, join 3 = %d\n", coroutine, callable,
              left + right);
  return coroutine == 6765 && callable == 7 && left + right == 3 ? 0 : 1;
}
