// fork_stack — the segmented stacks that fork-join children's frames are
// bump-allocated on (co_await canopy::join of calls, coroutine/
// fork_join_await.hpp): libfork's stacklets, docs/fork_join_design.md 3.2
// and 5 (stage 2).
//
// A stack is a chain of stacklets (16 KiB first, doubling as frames need):
// frames are pushed by a bump of the top stacklet's `sp` and popped in LIFO
// order; popping the last frame of a stacklet steps back to the one below
// and keeps the emptied one as a spare (`next`), so a recursion that
// crosses a stacklet's end does not map and free one each time.
//
// Who owns a stack: one thread at a time, the one that runs its top frame.
// The thread's current stack is fork_stack_state().top (null: empty, none
// taken yet). The fork-join protocol (coroutine/fork_region.hpp) moves
// stacks between threads at a join whose rest was stolen: the loser gives a
// stack that holds frames away (release_stack), the winner adopts the
// join's (adopt_stack). Every run of region frames starts on an empty stack
// (enter_stack_run / leave_stack_run, in region_scope).
//
// Which frames are stacklet frames: every stacklet is carved from one
// address range reserved once (mmap with MAP_NORESERVE), so a task's
// operator delete tells a stacklet frame from a block-pool frame with one
// unsigned compare (on_fork_stack).
//
// Empty stacklets are kept per worker (two, in join_worker: stacklet_cache)
// and, beyond that, in a shared pool under a mutex; a thread that is not a
// worker takes from and gives to the shared pool directly.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "block_pool.hpp"
#include "sanitizers.hpp"

namespace canopy::detail {

// One segment of a stack. The header sits at the start of the segment's
// memory; frames lie in [lo(), hi).
struct stacklet {
  std::byte* sp;       // the first free byte
  std::byte* hi;       // the end of the segment
  stacklet* prev;      // the segment below (null: the bottom)
  stacklet* next;      // an empty spare above, kept after its last pop
  std::size_t bytes;   // the segment's size, header included

  static constexpr std::size_t header = 48;  // sizeof, rounded up to 16
  [[nodiscard]] std::byte* lo() noexcept { return reinterpret_cast<std::byte*>(this) + header; }
  // No frame on this segment nor below it.
  [[nodiscard]] bool empty() noexcept { return sp == lo() && prev == nullptr; }
};
static_assert(sizeof(stacklet) <= stacklet::header);

// The empty stacklets a worker keeps (join_worker owns one); the rest go to
// the shared pool, and so do these when the worker is destroyed.
class stacklet_cache {
 public:
  static constexpr int capacity = 2;
  stacklet_cache() = default;
  stacklet_cache(const stacklet_cache&) = delete;
  stacklet_cache& operator=(const stacklet_cache&) = delete;
  stacklet_cache(stacklet_cache&&) = delete;
  stacklet_cache& operator=(stacklet_cache&&) = delete;
  ~stacklet_cache();

  stacklet* slots[capacity] = {};
};

// A thread's side: its current stack, the cache it takes empty stacklets
// from (null: the shared pool), and the mark that puts the next task frame
// on the stack (run_fork_child sets it around a call's make()).
struct fork_stack_thread {
  stacklet* top = nullptr;
  stacklet_cache* cache = nullptr;
  // 0: task frames come from the block pool; want_stack_frame: the next
  // one goes on the stack; else the address of the frame that consumed the
  // mark (or 0 again when it could not go on the stack).
  std::uintptr_t mark = 0;
  // While a call's make() runs (run_fork_child): where its child delivers
  // its result (the promise's tagged result word) and the context it runs
  // in. The frame that consumed the mark takes both at its initial
  // suspension and starts at once, in the same entry into its body; it
  // leaves launch_result 0, which tells run_fork_child that it ran.
  // launch_type names the child's task<T> (launch_type_tag<T>): a frame
  // of another type that consumed the mark does not start.
  std::uintptr_t launch_result = 0;
  void* launch_context = nullptr;
  const void* launch_type = nullptr;
};

// Whether a call's child starts as it is made (promise_of's
// initial_suspend). Not with Clang: its ramp does not enter the body for
// the initial suspension, so there is no entry to save, and a suspension
// decided at run time made its forks dearer; a call's child is made
// suspended and resumed by its launch there.
#if defined(__clang__)
inline constexpr bool children_start_when_made = false;
#else
inline constexpr bool children_start_when_made = true;
#endif

// One address per result type, for fork_stack_thread::launch_type.
template <class T>
inline constexpr char launch_type_tag = 0;

// Not a frame's address (frames are 16-byte aligned).
inline constexpr std::uintptr_t want_stack_frame = 1;

// The model check (tests/model/) runs its threads on one OS thread and
// gives each its own.
#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
inline constinit thread_local fork_stack_thread fork_stack_here{};
inline fork_stack_thread& fork_stack_state() noexcept { return fork_stack_here; }
#else
fork_stack_thread& fork_stack_state() noexcept;
#endif

// The reserved range every stacklet lies in: [low, low + span). Both 0
// until the first stacklet is made, so no pointer matches before. A thread
// that frees a stacklet frame allocated it, or got its stack by a hand-over
// that happens after the range was set, so it sees both values; any other
// thread may see the range as it was or as it is, but never a new span
// with the old low bound of 0 (every low address would then match):
// `low` is stored first and `span` published by a release store, read
// first by an acquire load.
// (std::atomic, not atomics/atomics.hpp: the range is not a step of any
// protocol the checkers explore, and their builds define it themselves.)
struct stacklet_range {
  std::atomic<std::uintptr_t> low{0};
  std::atomic<std::uintptr_t> span{0};
};
extern constinit stacklet_range fork_stack_range;

// Whether `frame` lies on a stacklet: every task's operator delete asks.
// (Relacy's headers take the memory orders' names over; its checks make no
// task frames.)
[[gnu::always_inline]] inline bool on_fork_stack([[maybe_unused]] const void* frame) noexcept {
#if defined(CANOPY_RELACY)
  return false;
#else
  // acquire: pairs with the reservation's release store of `span`, so
  // the low bound read next is the one stored before it.
  const std::uintptr_t span = fork_stack_range.span.load(std::memory_order_acquire);
  return reinterpret_cast<std::uintptr_t>(frame) -
             fork_stack_range.low.load(std::memory_order_relaxed) <
         span;
#endif
}

// A task<T> frame (promise_of::operator new): on the calling thread's stack
// when the mark asks for it and the stack can take it, else from the block
// pool. Out of line: it reads a thread_local and is called from ramps that
// may be inlined into coroutine bodies.
void* allocate_task_frame(std::size_t size);
// Frees a stacklet frame (on_fork_stack): it must be the top frame of the
// calling thread's stack; anything else terminates with a message.
void free_stack_frame(void* frame, std::size_t size) noexcept;

// The slow steps of the two above: the top stacklet cannot take the frame
// (a stacklet that can becomes the top, or the frame goes to the block
// pool); the top stacklet's last frame was popped (step back to the one
// below, keep this one as its spare); a frame that is not the top one.
void* allocate_in_new_stacklet(fork_stack_thread& here, std::size_t size);
void step_back(fork_stack_thread& here, stacklet* top) noexcept;
[[noreturn]] void fail_not_on_top() noexcept;

// What promise_of's operator new and delete call. With GCC the fast paths
// are inline (a bump, a pop, the block pool's take and give: GCC computes a thread_local's address anew in
// each resumption of a coroutine); with Clang, whose coroutine bodies may
// keep such an address across a suspension, and in the checking builds,
// they are the calls above. Under ASan the calls poison and unpoison.
#if !defined(__clang__) && !defined(CANOPY_ADDRESS_SANITIZER) && !defined(CANOPY_MODEL_CHECK) && \
    !defined(CANOPY_RELACY)
[[gnu::always_inline]] inline void* new_task_frame(std::size_t size) {
  fork_stack_thread& here = fork_stack_state();
  if (here.mark != want_stack_frame) [[likely]] {
    return allocate_pooled_block(size);
  }
  const std::size_t bytes = (size + 15) & ~std::size_t{15};
  stacklet* const top = here.top;
  if (top == nullptr || static_cast<std::size_t>(top->hi - top->sp) < bytes) [[unlikely]] {
    return allocate_in_new_stacklet(here, size);
  }
  std::byte* const frame = top->sp;
  top->sp = frame + bytes;
  here.mark = reinterpret_cast<std::uintptr_t>(frame);
  return frame;
}
[[gnu::always_inline]] inline void delete_stack_frame(void* frame, std::size_t size) noexcept {
  fork_stack_thread& here = fork_stack_state();
  stacklet* const top = here.top;
  auto* const begin = static_cast<std::byte*>(frame);
  const std::size_t bytes = (size + 15) & ~std::size_t{15};
  if (top == nullptr || begin + bytes != top->sp) [[unlikely]] {
    fail_not_on_top();
  }
  top->sp = begin;
  if (begin == top->lo() && top->prev != nullptr) [[unlikely]] {
    step_back(here, top);
  }
}
[[gnu::always_inline]] inline void delete_task_frame(void* frame, std::size_t size) noexcept {
  if (on_fork_stack(frame)) {
    delete_stack_frame(frame, size);
  } else {
    free_pooled_block(frame, size);
  }
}
#else
inline void* new_task_frame(std::size_t size) { return allocate_task_frame(size); }
inline void delete_task_frame(void* frame, std::size_t size) noexcept {
  if (on_fork_stack(frame)) {
    free_stack_frame(frame, size);
  } else {
    free_block(frame, size);
  }
}
#endif

// After a call's make(), when the mark as make() left it (`consumed`) is
// not the made task's frame. Terminates (canopy::call's contract) when make()
// left a task frame of its own on the stack; one it freed again is fine.
void stack_frame_not_kept(std::uintptr_t consumed) noexcept;
// A call's make() started the child it made (promise_of's initial_suspend)
// and then returned another task or threw: canopy::call's contract is
// broken after the child ran, so nothing can be undone. Terminates with a
// message.
[[noreturn]] void started_frame_not_returned() noexcept;
// A task<T> (`type`: launch_type_tag<T>) that owns `frame`, on a
// stacklet, is destroyed: allowed while a call's make() runs for a scratch
// task of another type; the call's own first task (started as the join's
// child, or about to be launched) may not be dropped: canopy::call's
// contract as above (terminates). `children_start` is the caller's
// children_start_when_made: the compiler of the code that launches decides
// it, which need not be the one that built the library.
void stack_frame_dropped(void* frame, const void* type, bool children_start) noexcept;

// ------------------------------------------------ the protocol's steps
// Called by the thread that runs region frames; none touches another
// thread's stack.

#if defined(CANOPY_RELACY)
// Relacy sees only its own variables, not a stacklet's plain words: its
// check (tests/relacy/) is told of the read below, which may be made only
// by the thread that owns the stack.
void stack_words_read(const stacklet& stack) noexcept;
#endif

// The calling thread's stack if it holds frames, else null.
inline stacklet* stack_in_use() noexcept {
  stacklet* const top = fork_stack_state().top;
#if defined(CANOPY_RELACY)
  if (top != nullptr) {
    stack_words_read(*top);
  }
#endif
  return top != nullptr && !top->empty() ? top : nullptr;
}
// Gives the calling thread's stack away (it holds frames another thread
// will adopt); the thread goes on with an empty one.
inline void release_stack() noexcept { fork_stack_state().top = nullptr; }
// Takes over `stack` (not null; the calling thread's own must be empty):
// its frames are now this thread's to run and pop.
void adopt_stack(stacklet* stack) noexcept;

// A run of region frames begins on this thread (region_scope): it gets an
// empty stack, and empty stacklets come from `cache` (null: the shared
// pool). Returns what leave_stack_run puts back.
struct stack_run_outer {
  stacklet* top;
  stacklet_cache* cache;
};
inline stack_run_outer enter_stack_run(stacklet_cache* cache) noexcept {
  fork_stack_thread& here = fork_stack_state();
  const stack_run_outer outer{here.top, here.cache};
  here.top = nullptr;
  here.cache = cache;
  return outer;
}
// The run ended: its stack must be empty (terminates otherwise); the outer
// run's stack is current again.
void leave_stack_run_slow(fork_stack_thread& here) noexcept;
inline void leave_stack_run(stack_run_outer outer) noexcept {
  fork_stack_thread& here = fork_stack_state();
  if (here.top != nullptr) {
    leave_stack_run_slow(here);
  }
  here.top = outer.top;
  here.cache = outer.cache;
}

}  // namespace canopy::detail
