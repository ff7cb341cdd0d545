// Replaces the global operator new of a test binary to count the calling
// thread's allocations while counting is on (tests/allocation_counter.hpp).
// A file of its own: with the replacement in the same translation unit as
// the code under test, g++ 12 warns (-Wmismatched-new-delete) on every
// inlined new/delete pair.
#include "tests/allocation_counter.hpp"

#include <cstdlib>
#include <new>

namespace {
thread_local bool counting = false;
thread_local long counted = 0;
}  // namespace

namespace canopy::testing {

void count_allocations(bool on) noexcept {
  counting = on;
  if (on) {
    counted = 0;
  }
}

long allocations_counted() noexcept { return counted; }

}  // namespace canopy::testing

void* operator new(std::size_t size) {
  if (counting) {
    ++counted;
  }
  if (void* block = std::malloc(size == 0 ? 1 : size)) {
    return block;
  }
  throw std::bad_alloc();
}

void operator delete(void* block) noexcept { std::free(block); }
void operator delete(void* block, std::size_t /*size*/) noexcept { std::free(block); }
