#include "tests/model/model_checker.hpp"

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <boost/context/stack_traits.hpp>
#include <cstdlib>
#include <memory>
#include <new>
#include <utility>

#include "atomics/model_atomic.hpp"
#include "executor/sanitizers.hpp"

#if defined(CANOPY_THREAD_SANITIZER)
extern "C" {
void* __tsan_get_current_fiber();
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif

namespace canopy::detail::model {

namespace {

// ThreadSanitizer must be told about every stack switch, or it mistakes the
// fibers' stacks for one thread's and its shadow state grows without bound.
struct sanitizer_fiber {
#if defined(CANOPY_THREAD_SANITIZER)
  void* handle = nullptr;
  void create() { handle = __tsan_create_fiber(0); }
  void destroy() {
    if (handle != nullptr) {
      __tsan_destroy_fiber(handle);
      handle = nullptr;
    }
  }
  void switch_to() const { __tsan_switch_to_fiber(handle, 0); }
  static sanitizer_fiber current() { return {__tsan_get_current_fiber()}; }
#else
  void create() {}
  void destroy() {}
  void switch_to() const {}
  static sanitizer_fiber current() { return {}; }
#endif
};

namespace context = boost::context;

// Fiber stacks, kept for the next execution: an exploration builds hundreds
// of thousands of executions, and a fresh stack for each thread of each one
// costs page faults and allocator system calls (a quarter of the run time).
class stack_pool {
 public:
  stack_pool() = default;
  stack_pool(const stack_pool&) = delete;
  stack_pool& operator=(const stack_pool&) = delete;
  ~stack_pool() {
    for (void* base : free_) {
      std::free(base);
    }
  }

  context::stack_context allocate() {
    void* base = nullptr;
    if (free_.empty()) {
      base = std::malloc(size_);
      if (base == nullptr) {
        throw std::bad_alloc();
      }
    } else {
      base = free_.back();
      free_.pop_back();
    }
    context::stack_context stack;
    stack.size = size_;
    stack.sp = static_cast<char*>(base) + size_;
    return stack;
  }
  void deallocate(context::stack_context& stack) noexcept {
    free_.push_back(static_cast<char*>(stack.sp) - stack.size);
  }

 private:
  std::size_t size_ = context::stack_traits::default_size();
  std::vector<void*> free_;  // kept until exit: a handful of stacks
};

stack_pool stacks;

// The allocator Boost.Context takes by value: a handle on the pool.
struct pooled_stack {
  context::stack_context allocate() { return stacks.allocate(); }
  void deallocate(context::stack_context& stack) noexcept { stacks.deallocate(stack); }
};

// Words are named by the order in which the scenario's make() built them:
// every execution builds its objects afresh, often at other addresses, and a
// footprint recorded in one execution is compared with steps of later ones.
// A word built while the threads run, or a plain variable never built as an
// atomic, has no name: it conflicts with every access (conservative).
// Atomics keep their own name; the table below is for the operations that
// name a word by address (park_on, unpark_on, note_access), which are rare.
struct word_names {
  std::vector<std::pair<const void*, std::uint32_t>> named;  // in the order built
  bool naming = false;  // true while make() builds the scenario
};

word_names names;

std::uint32_t word_id(const void* address) {
  for (auto entry = names.named.rbegin(); entry != names.named.rend(); ++entry) {
    if (entry->first == address) {
      return entry->second;
    }
  }
  return unnamed_word;
}

// One shared access of a step: a word, and whether the step writes it.
struct access {
  std::uint32_t word;
  access_kind kind;
};

// Every shared access of one step (a thread's run from one schedule point to
// the next): its leading operation, then whatever it peeked, parked on or
// woke before its next schedule point.
using footprint = std::vector<access>;

// Two steps commute when no word is touched by both with a write among them.
bool independent(const footprint& first, const footprint& second) {
  for (const access& one : first) {
    for (const access& other : second) {
      const bool same_word =
          one.word == other.word || one.word == unnamed_word || other.word == unnamed_word;
      if (same_word && (one.kind == access_kind::write || other.kind == access_kind::write ||
                        one.word == unnamed_word || other.word == unnamed_word)) {
        return false;
      }
    }
  }
  return true;
}

struct logical_thread {
  context::fiber fiber;
  sanitizer_fiber sanitizer;
  bool started = false;
  bool finished = false;
  const void* parked_on = nullptr;
};

// A thread asleep at a node, with the footprint of the step it would take.
struct sleeper {
  std::size_t thread;
  footprint step;
};

// A schedule point of the depth-first search: the threads to try there, in
// order (current thread first: no preemption), which one the execution in
// progress takes, the footprint each tried one's step had, and the threads
// asleep on arrival (never tried here).
struct node {
  std::vector<std::size_t> candidates;
  std::size_t chosen = 0;
  std::vector<footprint> tried_steps;
  std::vector<sleeper> asleep;
};

// State of the execution in progress (the checker is single-threaded: all
// logical threads are fibers of the thread that calls explore()).
struct execution {
  std::vector<logical_thread> threads;
  std::size_t current = 0;
  context::fiber scheduler;  // where a logical thread returns at a schedule point
  sanitizer_fiber scheduler_sanitizer;
  std::vector<node>* nodes = nullptr;
  reduction mode = reduction::none;
  std::size_t depth = 0;
  int preemptions = 0;
  int preemption_bound = 0;
  std::size_t steps = 0;
  std::size_t max_steps = 0;
  bool step_limit_hit = false;
  bool free_running = false;            // teardown: no switching, no parking
  footprint step;                       // accesses of the step in progress
  std::vector<sleeper> next_asleep;     // sleep set of the node the next pick creates
  std::vector<std::size_t> candidates;  // pick_next's buffer
  std::string schedule;
};

execution* active = nullptr;

bool recording() { return active != nullptr && !active->free_running; }

void switch_to_scheduler() {
  active->scheduler_sanitizer.switch_to();
  active->scheduler = std::move(active->scheduler).resume();
}

void resume_thread(execution& run, std::size_t index) {
  run.current = index;
  run.threads[index].sanitizer.switch_to();
  run.threads[index].fiber = std::move(run.threads[index].fiber).resume();
}

bool runnable(const logical_thread& thread) {
  return !thread.finished && thread.parked_on == nullptr;
}

bool asleep_in(const std::vector<sleeper>& asleep, std::size_t thread) {
  for (const sleeper& entry : asleep) {
    if (entry.thread == thread) {
      return true;
    }
  }
  return false;
}

enum class pick_outcome { thread, terminal, sleep_blocked };

// Picks the next thread: the current one first (no preemption), then the
// others in index order, leaving out threads asleep at this node. Replays
// recorded choices, records new ones.
pick_outcome pick_next(execution& run, std::size_t& next) {
  std::vector<std::size_t>& candidates = run.candidates;
  candidates.clear();
  const bool current_runnable =
      run.current < run.threads.size() && runnable(run.threads[run.current]);
  if (current_runnable) {
    candidates.push_back(run.current);
  }
  if (!current_runnable || run.preemptions < run.preemption_bound) {
    for (std::size_t index = 0; index < run.threads.size(); ++index) {
      if (index != run.current && runnable(run.threads[index])) {
        candidates.push_back(index);
      }
    }
  }
  if (candidates.empty()) {
    return pick_outcome::terminal;
  }
  std::vector<node>& nodes = *run.nodes;
  if (run.depth == nodes.size()) {
    node fresh;
    fresh.asleep = std::move(run.next_asleep);
    for (const std::size_t candidate : candidates) {
      if (!asleep_in(fresh.asleep, candidate)) {
        fresh.candidates.push_back(candidate);
      }
    }
    if (fresh.candidates.empty()) {
      // Every thread that may run here is asleep: whatever comes next is a
      // reordering of an execution explored already.
      return pick_outcome::sleep_blocked;
    }
    nodes.push_back(std::move(fresh));
  }
  const node& here = nodes[run.depth];
  next = here.candidates[here.chosen];
  if (current_runnable && next != run.current) {
    ++run.preemptions;
  }
  run.schedule += static_cast<char>('0' + next);
  return pick_outcome::thread;
}

// After the step of the node at run.depth: keep its footprint for the
// siblings tried later, and work out who sleeps at the next node — the
// threads asleep here or tried here before, whose steps commute with it.
void finish_step(execution& run) {
  node& here = (*run.nodes)[run.depth];
  if (here.tried_steps.size() <= here.chosen) {
    here.tried_steps.resize(here.chosen + 1);
  }
  here.tried_steps[here.chosen] = run.step;
  ++run.depth;
  if (run.mode != reduction::sleep_sets || run.depth < run.nodes->size()) {
    return;  // replaying: the next node exists with its sleep set
  }
  run.next_asleep.clear();
  for (const sleeper& entry : here.asleep) {
    if (independent(entry.step, run.step)) {
      run.next_asleep.push_back(entry);
    }
  }
  for (std::size_t earlier = 0; earlier < here.chosen; ++earlier) {
    if (independent(here.tried_steps[earlier], run.step)) {
      run.next_asleep.push_back({here.candidates[earlier], here.tried_steps[earlier]});
    }
  }
}

}  // namespace

std::uint32_t name_word(const void* address) noexcept {
  if (names.naming) {
    const auto word = static_cast<std::uint32_t>(names.named.size());
    names.named.emplace_back(address, word);
    return word;
  }
  if (active != nullptr) {
    // Built by a thread: the address may have held a named word before.
    names.named.emplace_back(address, unnamed_word);
  }
  return unnamed_word;
}

void note_word_access(std::uint32_t word, access_kind kind) noexcept {
  if (recording()) {
    active->step.push_back({word, kind});
  }
}

void note_access(const void* address, access_kind kind) noexcept {
  if (recording()) {
    active->step.push_back({word_id(address), kind});
  }
}

void schedule_point() noexcept {
  if (!recording()) {
    return;  // outside an exploration (e.g. static initialisation)
  }
  if (++active->steps > active->max_steps) {
    active->step_limit_hit = true;
  }
  switch_to_scheduler();
}

void schedule_point(const void* address, access_kind kind) noexcept {
  schedule_point();
  note_access(address, kind);  // the operation about to run opens the new step
}

void schedule_point_on(std::uint32_t word, access_kind kind) noexcept {
  schedule_point();
  note_word_access(word, kind);
}

void park_on(const void* word, std::uint32_t expected, std::uint32_t current) noexcept {
  // The futex's compare reads the word; returning from the wait depends on
  // the wake that wrote it (unpark_on).
  note_access(word, access_kind::read);
  if (!recording() || current != expected) {
    return;  // the futex would not block
  }
  active->threads[active->current].parked_on = word;
  switch_to_scheduler();
  note_access(word, access_kind::read);
}

std::size_t current_thread() noexcept { return active != nullptr ? active->current : 0; }

void unpark_on(const void* word) noexcept {
  if (active == nullptr) {
    return;
  }
  note_access(word, access_kind::write);
  for (logical_thread& thread : active->threads) {
    if (thread.parked_on == word) {
      thread.parked_on = nullptr;
    }
  }
}

exploration_result explore(const std::function<scenario()>& make, int preemption_bound,
                           std::uint64_t max_executions, std::size_t max_steps, reduction mode) {
  exploration_result result;
  std::vector<node> nodes;
  for (;;) {
    names.named.clear();
    names.naming = true;
    scenario current = make();
    names.naming = false;
    execution run;
    run.nodes = &nodes;
    run.mode = mode;
    run.preemption_bound = preemption_bound;
    run.max_steps = max_steps;
    run.threads.resize(current.threads.size());
    for (std::size_t index = 0; index < current.threads.size(); ++index) {
      run.threads[index].fiber = context::fiber(std::allocator_arg, pooled_stack{},
                                                [&run, &current, index](context::fiber&& back) {
                                                  run.scheduler = std::move(back);
                                                  current.threads[index]();
                                                  run.threads[index].finished = true;
                                                  run.scheduler_sanitizer.switch_to();
                                                  return std::move(run.scheduler);
                                                });
    }
    run.scheduler_sanitizer = sanitizer_fiber::current();
    for (logical_thread& thread : run.threads) {
      thread.sanitizer.create();
    }
    active = &run;
    run.current = run.threads.size();  // nobody runs yet: the first pick is free
    bool sleep_blocked = false;
    for (;;) {
      if (run.step_limit_hit) {
        break;
      }
      std::size_t next = 0;
      const pick_outcome outcome = pick_next(run, next);
      if (outcome != pick_outcome::thread) {
        sleep_blocked = outcome == pick_outcome::sleep_blocked;
        break;  // everyone finished or parked, or everyone who may run is asleep
      }
      run.step.clear();
      resume_thread(run, next);
      finish_step(run);
    }
    std::vector<bool> parked(run.threads.size());
    for (std::size_t index = 0; index < run.threads.size(); ++index) {
      parked[index] = run.threads[index].parked_on != nullptr;
    }
    std::string verdict;
    run.free_running = true;
    if (!run.step_limit_hit && !sleep_blocked) {
      verdict = current.check(parked);
    }
    if (current.teardown) {
      current.teardown();
    }
    // Run every unfinished thread to its end so that its stack unwinds.
    for (std::size_t index = 0; index < run.threads.size(); ++index) {
      while (!run.threads[index].finished) {
        run.threads[index].parked_on = nullptr;
        resume_thread(run, index);
      }
    }
    active = nullptr;
    for (logical_thread& thread : run.threads) {
      thread.sanitizer.destroy();
    }
    ++result.executions;
    if (sleep_blocked) {
      ++result.sleep_set_blocked;
    }
    if (!verdict.empty()) {
      result.failure = verdict;
      result.failing_schedule = run.schedule;
      return result;
    }
    // Backtrack: advance the deepest choice that has options left.
    while (!nodes.empty() && nodes.back().chosen + 1 >= nodes.back().candidates.size()) {
      nodes.pop_back();
    }
    if (nodes.empty()) {
      result.complete = true;
      return result;
    }
    ++nodes.back().chosen;
    if (result.executions >= max_executions) {
      return result;
    }
  }
}

}  // namespace canopy::detail::model
