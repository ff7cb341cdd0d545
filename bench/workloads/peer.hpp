#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace canopy::bench {

// The executors a workload can run on. `baseline` is no executor at all:
// the same measurement in a process that has none, which shows the floor the
// measurement itself cannot go below (idle_cpu only).
enum class peer { canopy, tbb, asio, baseline };

inline constexpr std::array<peer, 4> all_peers{peer::canopy, peer::tbb, peer::asio, peer::baseline};

[[nodiscard]] constexpr std::string_view peer_name(peer executor) {
  switch (executor) {
    case peer::canopy:
      return "canopy";
    case peer::tbb:
      return "tbb";
    case peer::asio:
      return "asio";
    case peer::baseline:
      return "baseline";
  }
  return "unknown";
}

[[nodiscard]] constexpr std::optional<peer> parse_peer(std::string_view name) {
  for (const peer executor : all_peers) {
    if (peer_name(executor) == name) {
      return executor;
    }
  }
  return std::nullopt;
}

}  // namespace canopy::bench
