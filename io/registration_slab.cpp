#include "registration_slab.hpp"

#include <new>

namespace canopy::io::detail {

registration_slab::registration_slab()
    : chunks_(
          std::make_unique<canopy::detail::atomics::atomic<registration_entry*>[]>(max_chunks)) {}

registration_slab::~registration_slab() {
  for (std::size_t chunk = 0; chunk < max_chunks; ++chunk) {
    delete[] chunks_[chunk].load(canopy::detail::atomics::relaxed);
  }
}

std::uint32_t registration_slab::allocate(std::error_code& error) noexcept {
  const std::lock_guard guard(slots_mutex_);
  if (!free_slots_.empty()) {
    const std::uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  if (slot_count_ == max_chunks * chunk_size) {
    error = std::make_error_code(std::errc::too_many_files_open);
    return 0;
  }
  const std::uint32_t slot = slot_count_;
  if ((slot & (chunk_size - 1)) == 0) {
    auto* chunk = new (std::nothrow) registration_entry[chunk_size];
    if (chunk == nullptr) {
      error = std::make_error_code(std::errc::not_enough_memory);
      return 0;
    }
    // release: pairs with find()'s acquire load on the poller thread.
    chunks_[slot >> chunk_bits].store(chunk, canopy::detail::atomics::release);
  }
  ++slot_count_;
  return slot;
}

void registration_slab::release(std::uint32_t slot) noexcept {
  const std::lock_guard guard(slots_mutex_);
  free_slots_.push_back(slot);
}

}  // namespace canopy::io::detail
