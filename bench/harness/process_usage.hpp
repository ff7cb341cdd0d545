#pragma once

#include <chrono>
#include <cstddef>

namespace canopy::bench {

// CPU time (user + system) consumed so far by all threads of this process.
[[nodiscard]] std::chrono::nanoseconds process_cpu_time();

// CPU time consumed so far by every thread of this process except the
// calling one, summed from /proc/self/task/*/schedstat (the scheduler's
// nanosecond run times; getrusage's figure is coarser). Threads that exited
// are not counted. Throws std::runtime_error when /proc cannot be read.
[[nodiscard]] std::chrono::nanoseconds other_threads_cpu_time();

// Resident set size of this process right now (VmRSS), in bytes.
[[nodiscard]] std::size_t resident_bytes();

// Hands memory that glibc malloc holds but no longer uses back to the kernel,
// so that the next resident_bytes() difference counts fresh pages only.
void return_free_heap_pages();

}  // namespace canopy::bench
