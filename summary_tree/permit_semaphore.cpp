#include "permit_semaphore.hpp"

#include <algorithm>

namespace canopy::detail {

std::uint32_t permit_semaphore::release(std::uint32_t n) noexcept {
  // seq_cst: this load (and the CAS below) is the producer half of the
  // store-buffering handshake with add_sleeper(): the producer set a root bit
  // (seq_cst RMW) before this read; a sleeper adds itself (seq_cst RMW here)
  // before it re-reads the root words. One of the two must see the other.
  std::uint64_t word = word_.load(atomics::seq_cst);
  for (;;) {
    const std::uint32_t permits = permits_of(word);
    const std::uint32_t sleepers = sleepers_of(word);
    const std::uint32_t grant = std::min(n, sleepers - permits);
    if (grant == 0) {
      return 0;
    }
    // seq_cst on success: pairs with add_sleeper()/try_acquire(), see above.
    if (word_.compare_exchange_weak(word, word + grant * one_permit, atomics::seq_cst,
                                    atomics::seq_cst)) {
      return grant;
    }
  }
}

bool permit_semaphore::try_acquire() noexcept {
  // acquire on load/CAS: a permit taken here pairs with the release() that
  // granted it, so the root-bit store that preceded the grant is visible.
  std::uint64_t word = word_.load(atomics::acquire);
  while (permits_of(word) != 0) {
    if (word_.compare_exchange_weak(word, word - one_permit, atomics::acq_rel, atomics::acquire)) {
      return true;
    }
  }
  return false;
}

void permit_semaphore::add_sleeper() noexcept {
  // seq_cst: the sleeper half of the handshake described in release(); the
  // worker re-reads the root words (seq_cst loads) after this.
  word_.fetch_add(one_sleeper, atomics::seq_cst);
}

bool permit_semaphore::remove_sleeper() noexcept {
  // acq_rel: a consumed permit carries the same visibility as try_acquire().
  std::uint64_t word = word_.load(atomics::acquire);
  for (;;) {
    const std::uint32_t sleepers = sleepers_of(word) - 1;
    const bool consumes = permits_of(word) > sleepers;
    const std::uint64_t next = word - one_sleeper - (consumes ? one_permit : 0);
    if (word_.compare_exchange_weak(word, next, atomics::acq_rel, atomics::acquire)) {
      return consumes;
    }
  }
}

bool permit_semaphore::remove_sleeper_woken_by_permit() noexcept {
  // acq_rel: as remove_sleeper(). permits <= sleepers before means
  // permits - 1 <= sleepers - 1 after, and 0 <= sleepers - 1 when no permit
  // is left (the woken worker was counted).
  std::uint64_t word = word_.load(atomics::acquire);
  for (;;) {
    const bool consumes = permits_of(word) != 0;
    const std::uint64_t next = word - one_sleeper - (consumes ? one_permit : 0);
    if (word_.compare_exchange_weak(word, next, atomics::acq_rel, atomics::acquire)) {
      return consumes;
    }
  }
}

permit_semaphore::snapshot permit_semaphore::load() const noexcept {
  const std::uint64_t word = word_.load(atomics::acquire);
  return {permits_of(word), sleepers_of(word)};
}

}  // namespace canopy::detail
