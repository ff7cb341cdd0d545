#include "harness/process_usage.hpp"

#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

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

std::chrono::nanoseconds other_threads_cpu_time() {
  const std::unique_ptr<DIR, int (*)(DIR*)> tasks(opendir("/proc/self/task"), &closedir);
  if (!tasks) {
    throw std::runtime_error("cannot open /proc/self/task");
  }
  const std::string calling_thread = std::to_string(gettid());
  std::chrono::nanoseconds total{0};
  // readdir is safe on a stream that only this call uses.
  while (const dirent* entry = readdir(tasks.get())) {  // NOLINT(concurrency-mt-unsafe)
    const std::string name = entry->d_name;
    if (name == "." || name == ".." || name == calling_thread) {
      continue;
    }
    // schedstat: time on the CPU (ns), time waiting to run, time slices.
    std::ifstream schedstat("/proc/self/task/" + name + "/schedstat");
    long long run_nanoseconds = 0;
    if (schedstat >> run_nanoseconds) {
      total += std::chrono::nanoseconds(run_nanoseconds);
    }  // else the thread exited after readdir saw it
  }
  return total;
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
