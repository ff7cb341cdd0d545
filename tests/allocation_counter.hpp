// Counting the calling thread's heap allocations (operator new) in a test
// binary that links tests/allocation_counter.cpp.
#pragma once

namespace canopy::testing {

// Start (resetting the count) or stop counting on the calling thread.
void count_allocations(bool on) noexcept;
// What the calling thread allocated since counting started.
long allocations_counted() noexcept;

}  // namespace canopy::testing
