// registration_slab — the reactor's registrations: one entry a registered
// descriptor (its readiness, its waiters), kept in a slab of chunks that is
// never freed while the reactor lives. Internal (canopy::io::detail); the
// reactor (io/reactor.hpp) is its only user.
//
// Identity. A slot is reused after its registration is removed; each reuse
// bumps the entry's generation, and a registration_id (slot, generation) —
// also the epoll cookie — names one registration only. An id whose
// generation no longer matches is stale: every access through with_live()
// treats it as "removed", so a late event or a late operation on a closed
// socket touches nothing.
//
// Threads. Slot allocation is guarded by one mutex; each entry's state by
// its own (entry::lock, a canopy::detail::atomics::futex_mutex). Chunks are published with a
// release store and read with an acquire load (find), so the poller may
// look an entry up without the allocation mutex. Entries are never freed
// before the slab, so a pointer from find() stays valid for the slab's life.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

#include "../atomics/atomics.hpp"
#include "../atomics/futex_mutex.hpp"
#include "../wait/waker.hpp"

namespace canopy::io::detail {

struct registration_id {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
};

// One registration. Everything but the generation check is guarded by `lock`.
// A futex_mutex, not a std::mutex: the poller's deliver and every readiness
// step of a read or a write take it, and its uncontended path is inline. It
// sleeps rather than spins once contended, as reactor::add and remove hold
// it across epoll_ctl.
struct registration_entry {
  canopy::detail::atomics::futex_mutex lock;
  std::uint32_t generation = 1;
  bool live = false;
  int fd = -1;
  bool ready[2] = {false, false};
  bool error = false;
  // The peer closed its side (EPOLLRDHUP) or the socket failed (HUP, ERR):
  // reads end at once from now on (EOF or the error), and no later edge will
  // come, so read readiness is never cleared again (tokio keeps its
  // read-closed readiness the same way). Without this, a short read of the
  // last bytes, delivered in the same edge as the FIN, cleared readiness and
  // the read that would return EOF waited forever.
  bool read_closed = false;
  std::uint64_t tick = 0;  // events delivered to this registration
  waker waiters[2];        // one per direction; invalid when none
  waker persistent;        // woken on every edge (callback registrations)
  std::uint32_t pending_events = 0;
  // The io_uring backend (io/uring/completion_op.hpp). A completion
  // registration is added to epoll only when a readiness wait first needs
  // it (reactor::add's `deferred`).
  bool in_epoll = true;
  std::uint32_t epoll_events = 0;  // what a deferred epoll_ctl(ADD) asks for
  std::uint64_t epoll_cookie = 0;
  // The request in flight per direction, named by (generation, slot,
  // direction, sequence) in its user_data. It stays in_flight until its
  // completion is reaped, even after the registration is removed: remove()
  // and abandon() wait for that, so a slot is never reused, nor a buffer
  // released, while the kernel may still use them.
  struct completion {
    std::uint32_t generation = 0;  // of the registration that submitted it
    std::uint16_t sequence = 0;
    unsigned position = 0;  // where it was queued (completion_ring::cancel)
    bool in_flight = false;
    bool abandoned = false;          // its waiter left: drop the result
    bool done = false;               // completed, result not yet taken
    bool yields_descriptor = false;  // an accept: a result >= 0 is a descriptor
    // A send: bytes it sent are reported to the waiter that abandons it
    // (the write goes on from there), in abandoned_sent if it completed
    // only once abandoned (the cancel raced its completion).
    bool reports_sent = false;
    std::int32_t abandoned_sent = 0;
    std::int32_t result = 0;
    // A receive's buffer: where the kernel put the bytes of a result > 0,
    // kept (below) if the waiter leaves without them. Null for the others.
    const std::byte* receive_buffer = nullptr;

    // A result nobody will take: an accepted descriptor is closed, not leaked.
    void drop(std::int32_t dropped) const noexcept {
      if (yields_descriptor && dropped >= 0) {
        ::close(dropped);
      }
    }
    // Forget a completed result that was not taken.
    void forget_result() noexcept {
      if (done) {
        drop(result);
        done = false;
      }
    }
  };
  completion completions[2];
  // Bytes a receive took from the socket after its waiter left (a timeout,
  // a cancel, a destroyed task: uring_backend::abandon), from
  // kept_from on. The registration's next receive returns them before it
  // asks the kernel for more, so no byte is lost and the order holds. Empty
  // but for the moments after such a race; cleared when the registration is
  // removed.
  std::vector<std::byte> kept;
  std::size_t kept_from = 0;

  [[nodiscard]] bool has_kept() const noexcept { return kept_from < kept.size(); }
  // Copy up to `size` kept bytes to `into`; how many.
  std::size_t take_kept(std::byte* into, std::size_t size) noexcept {
    const std::size_t count = std::min(size, kept.size() - kept_from);
    std::memcpy(into, kept.data() + kept_from, count);
    kept_from += count;
    if (kept_from == kept.size()) {
      forget_kept();  // lost races are rare: no memory held between them
    }
    return count;
  }
  // Keep the `count` bytes at `from` after those already kept. Allocates:
  // std::bad_alloc ends the program here (the callers are noexcept), as
  // dropping the bytes would corrupt the stream.
  void keep(const std::byte* from, std::size_t count) noexcept {
    kept.insert(kept.end(), from, from + count);
  }
  void forget_kept() noexcept {
    kept = std::vector<std::byte>();
    kept_from = 0;
  }
  // Connections an accept request took after its waiter left (as kept
  // bytes are for a receive): the listener's next accept returns the
  // oldest first, so no connection is dropped. Empty but for the moments
  // after such a race; closed when the registration is removed. A push
  // that cannot allocate ends the program (the callers are noexcept), as
  // closing a connection the client saw accepted would drop it.
  std::vector<int> kept_accepted;

  // What a request whose waiter left got (a timeout, a cancel, a destroyed
  // task: uring_backend::abandon and complete, this entry's lock held): a
  // receive's `result` bytes (the kernel wrote them into its buffer, still
  // alive while abandon() waits) and an accept's connection are kept for
  // the next receive or accept, unless the registration was removed (the
  // socket is closing: nobody reads or accepts on). True when a connection
  // was kept: the caller must not close it.
  bool keep_left_result(const completion& op, std::int32_t result) noexcept {
    if (result < 0 || !live || generation != op.generation) {
      return false;
    }
    if (op.receive_buffer != nullptr && result > 0) {
      keep(op.receive_buffer, static_cast<std::size_t>(result));
    }
    if (op.yields_descriptor) {
      kept_accepted.push_back(result);
      return true;
    }
    return false;
  }
  void forget_kept_accepted() noexcept {
    for (const int descriptor : kept_accepted) {
      ::close(descriptor);
    }
    kept_accepted = std::vector<int>();
  }
};

class registration_slab {
 public:
  registration_slab();
  ~registration_slab();
  registration_slab(const registration_slab&) = delete;
  registration_slab& operator=(const registration_slab&) = delete;

  // A free slot (its entry not live). Errors: errc::too_many_files_open
  // (every slot in use), errc::not_enough_memory (a new chunk failed).
  std::uint32_t allocate(std::error_code& error) noexcept;
  // Give back a slot whose entry was made not live (and its generation bumped).
  void release(std::uint32_t slot) noexcept;

  // The entry of `slot`, or null if its chunk was never created.
  registration_entry* find(std::uint32_t slot) const noexcept {
    // acquire: pairs with the release store that published the chunk in allocate().
    registration_entry* chunk = chunks_[slot >> chunk_bits].load(canopy::detail::atomics::acquire);
    return chunk == nullptr ? nullptr : &chunk[slot & (chunk_size - 1)];
  }

  // The one preamble of every per-registration operation: find the entry,
  // lock it, check that `id` is still live. Returns body(entry) under the
  // lock, or `stale` for a removed (or never issued) id.
  template <class Result, class Body>
  Result with_live(registration_id id, Result stale, Body&& body) const noexcept {
    registration_entry* target = find(id.slot);
    if (target == nullptr) {
      return stale;
    }
    const std::lock_guard guard(target->lock);
    if (!target->live || target->generation != id.generation) {
      return stale;
    }
    return body(*target);
  }

 private:
  static constexpr std::size_t chunk_bits = 8;
  static constexpr std::size_t chunk_size = std::size_t{1} << chunk_bits;
  static constexpr std::size_t max_chunks = 4096;  // 1 Mi registrations

  std::mutex slots_mutex_;  // guards free_slots_, chunk creation, slot_count_
  std::vector<std::uint32_t> free_slots_;
  std::uint32_t slot_count_ = 0;
  std::unique_ptr<canopy::detail::atomics::atomic<registration_entry*>[]> chunks_;
};

}  // namespace canopy::io::detail
