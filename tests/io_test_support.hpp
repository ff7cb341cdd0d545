// Helpers for the io tests: descriptor counting and executors with a reactor.
#pragma once

#include <dirent.h>

#include <cstddef>
#include <memory>

#include "executor/executor.hpp"
#include "io/reactor.hpp"

namespace canopy::testing {

// Open descriptors of this process (entries of /proc/self/fd, minus the
// one opendir itself holds).
inline std::size_t open_fd_count() {
  DIR* directory = opendir("/proc/self/fd");
  if (directory == nullptr) {
    return 0;
  }
  std::size_t count = 0;
  while (const dirent* entry = readdir(directory)) {
    if (entry->d_name[0] != '.') {
      ++count;
    }
  }
  closedir(directory);
  return count - 1;
}

inline executor_config io_config(std::size_t workers) {
  executor_config config = io::with_reactor();
  config.worker_count = workers;
  return config;
}

}  // namespace canopy::testing
