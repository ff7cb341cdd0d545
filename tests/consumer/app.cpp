// A program that uses an installed Canopy the way a user's would: it names
// only <canopy/...> headers and links only "canopy" (pkg-config, CMake
// canopy::canopy, or meson dependency('canopy')). tests/consumer/run.sh
// builds it three ways and checks what it prints.
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
  const int fiber = canopy::spawn_fiber(pool, [] {
                      canopy::this_fiber::yield();
                      return 42;
                    }).join();
  const int callable = pool.spawn([] { return 7; }).join();
  pool.shutdown();
  std::printf("canopy consumer: fib(20) = %ld, fiber 42 = %d, callable 7 = %d\n", coroutine, fiber,
              callable);
  return coroutine == 6765 && fiber == 42 && callable == 7 ? 0 : 1;
}
