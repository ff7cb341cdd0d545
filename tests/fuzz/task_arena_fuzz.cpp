// task_arena_fuzz — random allocate / reserve / take / give_back / release
// sequences on a real task_arena, checked against a reference allocator
// (a std::set of the slots handed out and a map of the reserved ones).
//
// Checked after every step:
//   * no slot is handed out twice: a slot from allocate() or take() is
//     neither live nor reserved in the reference; a reservation's bits are
//     all free in the reference and lie in one occupancy word;
//   * none is lost: allocate() / reserve() fail only when every slot of the
//     partition (at its maximum size) is live or reserved;
//   * every slot belongs to the partition it was asked for and lies below
//     max_leaves; slot(index) is writable memory of its own (a tag written
//     at hand-out is still there at release);
//   * live_count() equals live + reserved in the reference, and at the end
//     for_each_live() visits exactly those slots.
// Any violation aborts with a message (libFuzzer reports it as a crash).
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "executor/task_arena.hpp"
#include "summary_tree/partition.hpp"

namespace {

[[noreturn]] void fail(const char* what, long detail) {
  std::fprintf(stderr, "task_arena_fuzz: %s (detail %ld)\n", what, detail);
  std::abort();
}

struct reference_allocator {
  std::set<std::uint32_t> live;      // handed out as tasks
  std::set<std::uint32_t> reserved;  // in some reservation, not taken yet

  [[nodiscard]] bool used(std::uint32_t slot) const {
    return live.count(slot) != 0 || reserved.count(slot) != 0;
  }
};

void write_tag(canopy::detail::task_arena& arena, std::uint32_t slot) {
  std::memcpy(arena.slot(slot).storage, &slot, sizeof slot);
}

void check_tag(canopy::detail::task_arena& arena, std::uint32_t slot) {
  std::uint32_t tag = 0;
  std::memcpy(&tag, arena.slot(slot).storage, sizeof tag);
  if (tag != slot) {
    fail("a live slot's storage was overwritten (two slots share memory?)", slot);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const std::size_t partitions = input.ConsumeIntegralInRange<std::size_t>(1, 4);
  const std::size_t signals = std::size_t{1} << input.ConsumeIntegralInRange<unsigned>(0, 2);
  const std::size_t max_leaves =
      partitions + input.ConsumeIntegralInRange<std::size_t>(0, 2 * partitions);
  const std::size_t initial = input.ConsumeIntegralInRange<std::size_t>(0, max_leaves);
  canopy::detail::task_arena arena(signals, initial, max_leaves, partitions);
  const std::size_t per_leaf = arena.tasks_per_leaf();
  reference_allocator model;
  std::array<canopy::detail::task_arena::reservation, 3> reservations{};

  const auto partition_of = [&](std::uint32_t slot) {
    return canopy::detail::partition_owner(arena.leaf_of(slot), partitions);
  };
  const auto partition_full = [&](std::size_t partition) {
    const std::size_t capacity =
        canopy::detail::partition_size(partition, max_leaves, partitions) * per_leaf;
    std::size_t used = 0;
    for (const std::uint32_t slot : model.live) {
      used += partition_of(slot) == partition ? 1 : 0;
    }
    for (const std::uint32_t slot : model.reserved) {
      used += partition_of(slot) == partition ? 1 : 0;
    }
    return used == capacity;
  };
  const auto accept_new_slot = [&](std::uint32_t slot, std::size_t partition) {
    if (arena.leaf_of(slot) >= max_leaves) {
      fail("slot beyond max_leaves", slot);
    }
    if (partition_of(slot) != partition) {
      fail("slot handed out from another partition", slot);
    }
    if (arena.leaf_of(slot) >= arena.leaf_limit()) {
      fail("slot beyond leaf_limit()", slot);
    }
  };

  int steps = 0;
  while (input.remaining_bytes() > 0 && steps++ < 2048) {
    const auto op = input.ConsumeIntegralInRange<unsigned>(0, 5);
    const std::size_t partition = input.ConsumeIntegralInRange<std::size_t>(0, partitions - 1);
    auto& reservation = reservations[input.ConsumeIntegralInRange<std::size_t>(0, 2)];
    switch (op) {
      case 0: {  // allocate one slot
        const auto slot = arena.allocate(partition);
        if (!slot) {
          if (!partition_full(partition)) {
            fail("allocate failed while the partition had free slots",
                 static_cast<long>(partition));
          }
          break;
        }
        accept_new_slot(*slot, partition);
        if (model.used(*slot)) {
          fail("allocate handed out a slot that is live or reserved", *slot);
        }
        model.live.insert(*slot);
        write_tag(arena, *slot);
        break;
      }
      case 1: {  // reserve a word (only into an empty reservation, as the executor does)
        if (reservation.free != 0) {
          break;
        }
        if (!arena.reserve(partition, reservation)) {
          if (!partition_full(partition)) {
            fail("reserve failed while the partition had free slots", static_cast<long>(partition));
          }
          if (reservation.free != 0) {
            fail("a failed reserve left bits in the reservation", 0);
          }
          break;
        }
        if (reservation.free == 0) {
          fail("reserve succeeded with no slots", 0);
        }
        if (reservation.first_slot % 64 != 0) {
          fail("reservation does not start at a word boundary", reservation.first_slot);
        }
        for (std::uint64_t bits = reservation.free; bits != 0; bits &= bits - 1) {
          const std::uint32_t slot =
              reservation.first_slot + static_cast<std::uint32_t>(std::countr_zero(bits));
          accept_new_slot(slot, partition);
          if (model.used(slot)) {
            fail("reserve handed out a slot that is live or reserved", slot);
          }
          model.reserved.insert(slot);
        }
        break;
      }
      case 2: {  // take from a reservation
        if (reservation.free == 0) {
          break;
        }
        const std::uint32_t slot = canopy::detail::task_arena::take(reservation);
        if (model.reserved.erase(slot) != 1) {
          fail("take returned a slot that was not reserved", slot);
        }
        model.live.insert(slot);
        write_tag(arena, slot);
        break;
      }
      case 3: {  // give a reservation's rest back
        for (std::uint64_t bits = reservation.free; bits != 0; bits &= bits - 1) {
          model.reserved.erase(reservation.first_slot +
                               static_cast<std::uint32_t>(std::countr_zero(bits)));
        }
        arena.give_back(reservation);
        if (reservation.free != 0) {
          fail("give_back left bits in the reservation", 0);
        }
        break;
      }
      default: {  // release a live slot (more often: keeps the arena churning)
        if (model.live.empty()) {
          break;
        }
        const std::size_t pick =
            input.ConsumeIntegralInRange<std::size_t>(0, model.live.size() - 1);
        auto it = model.live.begin();
        std::advance(it, static_cast<long>(pick));
        const std::uint32_t slot = *it;
        check_tag(arena, slot);
        model.live.erase(it);
        arena.release(slot);
        break;
      }
    }
    if (arena.live_count() != model.live.size() + model.reserved.size()) {
      fail("live_count() differs from the reference",
           static_cast<long>(arena.live_count()) -
               static_cast<long>(model.live.size() + model.reserved.size()));
    }
  }

  std::set<std::uint32_t> visited;
  arena.for_each_live([&](std::uint32_t slot) {
    if (!visited.insert(slot).second) {
      fail("for_each_live visited a slot twice", slot);
    }
  });
  for (const std::uint32_t slot : model.live) {
    check_tag(arena, slot);
    if (visited.erase(slot) != 1) {
      fail("for_each_live missed a live slot", slot);
    }
  }
  for (const std::uint32_t slot : model.reserved) {
    if (visited.erase(slot) != 1) {
      fail("for_each_live missed a reserved slot", slot);
    }
  }
  if (!visited.empty()) {
    fail("for_each_live visited a free slot", *visited.begin());
  }
  return 0;
}
