#pragma once

#include <optional>
#include <string>

#include "workloads/peer.hpp"

namespace canopy::bench {

// canopy_bench WORKLOAD [--peer canopy|tbb|asio] [--threads N] [--reps R]
//         | --list
struct command_line {
  bool list_workloads = false;
  std::string workload;
  peer executor = peer::canopy;
  unsigned threads = 0;  // filled with hardware_concurrency() when not given
  unsigned reps = 5;
};

// Parses argv; on an error returns nullopt after writing the reason to error.
[[nodiscard]] std::optional<command_line> parse_command_line(int argc, const char* const* argv,
                                                             std::string& error);

[[nodiscard]] std::string usage_text();

}  // namespace canopy::bench
