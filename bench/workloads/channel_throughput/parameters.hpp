#pragma once

#include <cstddef>
#include <cstdint>

// channel_throughput: producer_count producer tasks and one consumer task
// share one bounded channel of `capacity`. Producer p sends the values
// p * messages_per_producer ... (p + 1) * messages_per_producer - 1; the
// channel closes when the last producer is done (Canopy: the last one calls
// close(); tokio: the last Sender is dropped), and the consumer receives
// until the end of the channel. Result: wall time from the first spawn to the
// consumer's end / message_count, in ns/message (messages/s = 1e9 / value).
// The consumer's count and wrapping sum of the values are checked.
namespace canopy::bench::channel_throughput {

inline constexpr std::size_t producer_count = 4;
inline constexpr std::size_t capacity = 1'024;
inline constexpr std::size_t messages_per_producer = 250'000;
inline constexpr std::size_t message_count = producer_count * messages_per_producer;
inline constexpr std::uint64_t expected_sum =
    std::uint64_t{message_count} * (message_count - 1) / 2;

}  // namespace canopy::bench::channel_throughput
