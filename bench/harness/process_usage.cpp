#include "harness/process_usage.hpp"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

namespace canopy::bench {

namespace {

std::chrono::nanoseconds to_duration(const timeval& time) {
  return std::chrono::seconds(time.tv_sec) + std::chrono::microseconds(time.tv_usec);
}

}  // namespace

std::chrono::nanoseconds process_cpu_time() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) {
    throw std::runtime_error("getrusage(RUSAGE_SELF) failed");
  }
  return to_duration(usage.ru_utime) + to_duration(usage.ru_stime);
}

std::size_t resident_bytes() {
  // /proc/self/statm: total program size, then resident pages.
  std::ifstream statm("/proc/self/statm");
  std::size_t total_pages = 0;
  std::size_t resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) {
    throw std::runtime_error("cannot read /proc/self/statm");
  }
  return resident_pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

void return_free_heap_pages() { malloc_trim(0); }

}  // namespace canopy::bench
