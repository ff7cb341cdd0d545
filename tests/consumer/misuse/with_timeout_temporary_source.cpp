// expect: the wait source must be a named object
// with_timeout on a temporary wait source, which would be gone while the
// timed wait still used it.
#include <canopy/io.hpp>

#include <chrono>

canopy::task<void> wait_readable(const canopy::io::registration& registration) {
  using namespace std::chrono_literals;
  auto ready = co_await canopy::with_timeout(
      5ms, canopy::io::readiness_wait(registration, canopy::io::direction::read));
  static_cast<void>(ready);
}

int main() {}
