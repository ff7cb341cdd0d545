// timer_queue_fuzz — random arm / disarm / expire sequences on a real
// io::detail::timer_queue, with the cancel-at-the-deadline race of issue 27 as a
// step of its own: the clock reaches an entry's deadline (the entry is due,
// a waiter's ready() would say so) and the waiter disarms it and frees it
// before any expiry ran. The entries live on the heap and a disarmed one is
// freed at once, so a queue that kept or touched it afterwards is a
// heap-use-after-free under AddressSanitizer.
//
// Checked after every step, against a reference (each entry's deadline in
// ticks and whether it is armed):
//   * expire(now) fires exactly the armed entries whose deadline tick is at
//     most now's (never one early, none left behind), returns how many, and
//     sets has_fired() on each;
//   * a disarmed entry never fires, whatever the clock did before;
//   * pending() counts the armed, not yet fired entries;
//   * next_deadline() is never later than the earliest pending deadline.
// Any violation aborts with a message (libFuzzer reports it as a crash).
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "io/timer/timer_queue.hpp"

namespace {

using canopy::io::detail::timer_queue;

[[noreturn]] void fail(const char* what, long detail) {
  std::fprintf(stderr, "timer_queue_fuzz: %s (detail %ld)\n", what, detail);
  std::abort();
}

constexpr std::size_t slots = 16;

struct reference_entry {
  std::unique_ptr<timer_queue::entry> item = std::make_unique<timer_queue::entry>();
  std::uint64_t deadline = 0;  // ticks
  bool armed = false;          // armed and not fired yet
};

struct world {
  timer_queue queue;
  std::array<reference_entry, slots> entries;
  std::uint64_t now = 1;  // ticks; never goes back

  // Take the entry back and free it, as a waiter's frame going does.
  void disarm_and_free(reference_entry& entry) {
    queue.disarm(*entry.item);
    entry.item = std::make_unique<timer_queue::entry>();  // the old one is freed
    entry.armed = false;
  }

  void expire() {
    std::size_t due = 0;
    for (const auto& entry : entries) {
      due += entry.armed && entry.deadline <= now ? 1 : 0;
    }
    const std::size_t fired = queue.expire(queue.from_ticks(now));
    if (fired != due) {
      fail("expire fired a different number of entries than were due", static_cast<long>(fired));
    }
    for (std::size_t index = 0; index < slots; ++index) {
      auto& entry = entries[index];
      if (!entry.armed) {
        continue;
      }
      const bool should_fire = entry.deadline <= now;
      if (entry.item->has_fired() != should_fire) {
        fail(should_fire ? "a due entry did not fire" : "an entry fired before its deadline",
             static_cast<long>(index));
      }
      entry.armed = !should_fire;
    }
  }

  void check() {
    std::size_t pending = 0;
    std::optional<std::uint64_t> earliest;
    for (const auto& entry : entries) {
      if (entry.armed) {
        ++pending;
        if (!earliest || entry.deadline < *earliest) {
          earliest = entry.deadline;
        }
      }
    }
    if (queue.pending() != pending) {
      fail("pending() differs from the armed entries", static_cast<long>(queue.pending()));
    }
    if (earliest) {
      const auto next = queue.next_deadline();
      if (!next || *next > queue.from_ticks(*earliest)) {
        fail("next_deadline() is later than the earliest pending deadline",
             static_cast<long>(*earliest));
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  world state;
  const canopy::waker nobody;  // a wake through it is a no-op
  while (input.remaining_bytes() > 0) {
    const std::size_t index = input.ConsumeIntegralInRange<std::size_t>(0, slots - 1);
    reference_entry& entry = state.entries[index];
    switch (input.ConsumeIntegralInRange<int>(0, 4)) {
      case 0: {  // arm, from at the current tick (due at once) to far ahead
        if (entry.armed) {
          break;
        }
        // A fired entry is re-armed only as a new one (an entry is armed once).
        entry.item = std::make_unique<timer_queue::entry>();
        const std::uint32_t distance = input.ConsumeBool()
                                           ? input.ConsumeIntegralInRange<std::uint32_t>(0, 300)
                                           : input.ConsumeIntegral<std::uint32_t>() % 5000000U;
        entry.deadline = state.now + distance;
        static_cast<void>(state.queue.arm(*entry.item, state.queue.from_ticks(entry.deadline),
                                          nobody));
        entry.armed = true;
        break;
      }
      case 1:  // a waiter ends and takes its entry back (armed or already fired)
        state.disarm_and_free(entry);
        break;
      case 2:  // the driver expires at a later time
        state.now += input.ConsumeBool() ? input.ConsumeIntegralInRange<std::uint32_t>(0, 300)
                                         : input.ConsumeIntegral<std::uint32_t>() % 5000000U;
        state.expire();
        break;
      case 3:  // issue 27's window: the deadline has passed, no expiry ran yet,
               // and the waiter is cancelled: disarm and free, then expire
        if (entry.armed) {
          state.now = std::max(state.now, entry.deadline);
          state.disarm_and_free(entry);
          state.expire();
        }
        break;
      default:
        state.expire();  // at the same tick
        break;
    }
    state.check();
  }
  for (auto& entry : state.entries) {
    state.disarm_and_free(entry);
  }
  if (state.queue.pending() != 0) {
    fail("entries left after every waiter disarmed", static_cast<long>(state.queue.pending()));
  }
  return 0;
}
