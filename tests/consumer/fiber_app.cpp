// The consumer program for "canopy-fiber" (pkg-config canopy-fiber, CMake
// canopy::fiber, meson dependency('canopy-fiber')): fibers and their I/O
// forms from the installed <canopy/fiber.hpp> and <canopy/io/fiber.hpp>.
#include <canopy/fiber.hpp>
#include <canopy/io/fiber.hpp>  // not used below: checks that it installs whole
#include <cstdio>

int main() {
  canopy::executor_config config;
  config.worker_count = 2;
  canopy::executor pool(config);
  const int fiber = pool.spawn(canopy::fiber([] {
                          canopy::this_fiber::yield();
                          return 42;
                        }))
                        .get();
  pool.shutdown();
  std::printf("canopy consumer: fiber 42 = %d\n", fiber);
  return fiber == 42 ? 0 : 1;
}
