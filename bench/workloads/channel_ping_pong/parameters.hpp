#pragma once

#include <cstddef>
#include <cstdint>

// channel_ping_pong: two tasks and two channels of capacity 1, one each way.
// The driver sends 0, 1, ..., round_trips - 1 on `ping` and after each send
// receives the echo on `pong`; the echo task sends back every value it
// receives, until `ping` is closed. Result: wall time from the spawn of both
// tasks to the driver's last receive / round_trips, in ns/round trip. The
// driver's sum of the echoes and the echo task's count are checked.
namespace canopy::bench::channel_ping_pong {

inline constexpr std::size_t round_trips = 100'000;
inline constexpr std::uint64_t expected_sum = std::uint64_t{round_trips} * (round_trips - 1) / 2;

}  // namespace canopy::bench::channel_ping_pong
