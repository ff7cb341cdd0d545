// latency_histogram — log-linear buckets of nanoseconds (32 per power of
// two: each value is known within ~3 %), one writer, readers on any thread.
//
// Each load-generator connection owns one and records into it with relaxed
// load + store (single writer, no RMW); the progress line merges snapshots
// from another thread while it runs, the summary after it ends.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace canopy::demo {

class latency_histogram {
 public:
  static constexpr unsigned sub_bits = 5;  // 32 buckets per power of two
  static constexpr unsigned sub_count = 1U << sub_bits;
  static constexpr unsigned bucket_count = (64 - sub_bits + 1) * sub_count;

  void record(std::uint64_t nanoseconds) noexcept {
    std::atomic<std::uint64_t>& bucket = buckets_[index_of(nanoseconds)];
    bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    count_.store(count_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  [[nodiscard]] std::uint64_t count() const noexcept {
    return count_.load(std::memory_order_relaxed);
  }

  // Adds this histogram's counts into `into` (a plain array).
  void add_to(std::array<std::uint64_t, bucket_count>& into) const noexcept {
    for (unsigned i = 0; i < bucket_count; ++i) {
      into[i] += buckets_[i].load(std::memory_order_relaxed);
    }
  }

  // The value at quantile q (0..1) of merged counts: the bucket's upper edge.
  static std::uint64_t quantile(const std::array<std::uint64_t, bucket_count>& counts, double q) {
    std::uint64_t total = 0;
    for (const std::uint64_t one : counts) {
      total += one;
    }
    if (total == 0) {
      return 0;
    }
    const auto rank = static_cast<std::uint64_t>(std::max(1.0, q * static_cast<double>(total)));
    std::uint64_t seen = 0;
    for (unsigned i = 0; i < bucket_count; ++i) {
      seen += counts[i];
      if (seen >= rank) {
        return upper_edge(i);
      }
    }
    return upper_edge(bucket_count - 1);
  }

 private:
  static unsigned index_of(std::uint64_t value) noexcept {
    if (value < sub_count) {
      return static_cast<unsigned>(value);
    }
    const unsigned top = 63U - static_cast<unsigned>(std::countl_zero(value));  // >= sub_bits
    const unsigned shift = top - sub_bits;
    const auto sub = static_cast<unsigned>((value >> shift) & (sub_count - 1));
    return (shift + 1) * sub_count + sub;
  }
  static std::uint64_t upper_edge(unsigned index) noexcept {
    if (index < sub_count) {
      return index;
    }
    const unsigned shift = index / sub_count - 1;
    const std::uint64_t sub = index % sub_count;
    return ((sub_count + sub + 1) << shift) - 1;
  }

  std::array<std::atomic<std::uint64_t>, bucket_count> buckets_{};
  std::atomic<std::uint64_t> count_{0};
};

}  // namespace canopy::demo
