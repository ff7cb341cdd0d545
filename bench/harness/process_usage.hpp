#pragma once

#include <chrono>
#include <cstddef>

namespace canopy::bench {

// CPU time (user + system) consumed so far by all threads of this process.
[[nodiscard]] std::chrono::nanoseconds process_cpu_time();

// Resident set size of this process right now (VmRSS), in bytes.
[[nodiscard]] std::size_t resident_bytes();

// Hands memory that glibc malloc holds but no longer uses back to the kernel,
// so that the next resident_bytes() difference counts fresh pages only.
void return_free_heap_pages();

}  // namespace canopy::bench
