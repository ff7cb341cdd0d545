#include "command_line.hpp"

#include <charconv>
#include <string_view>
#include <thread>

#include "workloads/catalog.hpp"

namespace canopy::bench {

namespace {

// A positive decimal integer with nothing after it, or nullopt.
std::optional<unsigned> parse_positive(std::string_view text) {
  unsigned number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc{} || end != text.data() + text.size() || number == 0) {
    return std::nullopt;
  }
  return number;
}

}  // namespace

std::optional<command_line> parse_command_line(int argc, const char* const* argv,
                                               std::string& error) {
  command_line parsed;
  const unsigned hardware_threads = std::thread::hardware_concurrency();
  parsed.threads = hardware_threads == 0 ? 1 : hardware_threads;

  for (int index = 1; index < argc; ++index) {
    const std::string_view argument = argv[index];
    if (argument == "--list") {
      parsed.list_workloads = true;
      continue;
    }
    if (argument == "--peer" || argument == "--threads" || argument == "--reps") {
      if (index + 1 == argc) {
        error = std::string(argument) + " needs a value";
        return std::nullopt;
      }
      const std::string_view value = argv[++index];
      if (argument == "--peer") {
        const std::optional<peer> executor = parse_peer(value);
        if (!executor) {
          error = "unknown peer '" + std::string(value) + "'";
          return std::nullopt;
        }
        parsed.executor = *executor;
      } else {
        const std::optional<unsigned> number = parse_positive(value);
        if (!number) {
          error =
              std::string(argument) + " needs a positive integer, got '" + std::string(value) + "'";
          return std::nullopt;
        }
        (argument == "--threads" ? parsed.threads : parsed.reps) = *number;
      }
      continue;
    }
    if (argument.starts_with("-")) {
      error = "unknown option '" + std::string(argument) + "'";
      return std::nullopt;
    }
    if (!parsed.workload.empty()) {
      error = "more than one workload given";
      return std::nullopt;
    }
    if (find_workload(argument) == nullptr) {
      error = "unknown workload '" + std::string(argument) + "'";
      return std::nullopt;
    }
    parsed.workload = argument;
  }
  if (parsed.workload.empty() && !parsed.list_workloads) {
    error = "no workload given";
    return std::nullopt;
  }
  return parsed;
}

std::string usage_text() {
  std::string text =
      "usage: canopy_bench WORKLOAD [--peer canopy|tbb|asio|baseline] [--threads N] [--reps R]\n"
      "       canopy_bench --list\n"
      "  --peer     executor to run on (default canopy); baseline: none, the\n"
      "             measurement's own floor (idle_cpu only)\n"
      "  --threads  worker threads (default: hardware concurrency)\n"
      "  --reps     measured repetitions after one warm-up (default 5)\n"
      "  --list     print the workload names, one a line\n"
      "workloads:";
  for (const workload_descriptor& workload : workload_catalog) {
    text += ' ';
    text += workload.name;
  }
  return text + '\n';
}

}  // namespace canopy::bench
