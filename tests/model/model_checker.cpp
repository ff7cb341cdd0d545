#include "tests/model/model_checker.hpp"

#include <boost/context/fiber.hpp>
#include <utility>

#include "sync/model_atomic.hpp"

#if defined(__SANITIZE_THREAD__)
extern "C" {
void* __tsan_get_current_fiber();
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif

namespace canopy::model {

namespace {

// ThreadSanitizer must be told about every stack switch, or it mistakes the
// fibers' stacks for one thread's and its shadow state grows without bound.
struct sanitizer_fiber {
#if defined(__SANITIZE_THREAD__)
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

struct logical_thread {
  context::fiber fiber;
  sanitizer_fiber sanitizer;
  bool started = false;
  bool finished = false;
  const void* parked_on = nullptr;
};

struct choice {
  std::size_t chosen;
  std::size_t options;
};

// State of the execution in progress (the checker is single-threaded: all
// logical threads are fibers of the thread that calls explore()).
struct execution {
  std::vector<logical_thread> threads;
  std::size_t current = 0;
  context::fiber scheduler;  // where a logical thread returns at a schedule point
  sanitizer_fiber scheduler_sanitizer;
  std::vector<choice>* choices = nullptr;
  std::size_t depth = 0;
  int preemptions = 0;
  int preemption_bound = 0;
  std::size_t steps = 0;
  std::size_t max_steps = 0;
  bool step_limit_hit = false;
  bool free_running = false;  // teardown: no switching, no parking
  std::string schedule;
};

execution* active = nullptr;

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

// Picks the next thread: the current one first (no preemption), then the
// others in index order. Replays recorded choices, records new ones.
std::size_t pick_next(execution& run) {
  std::vector<std::size_t> candidates;
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
    return run.threads.size();
  }
  std::vector<choice>& choices = *run.choices;
  std::size_t selected = 0;
  if (run.depth < choices.size()) {
    selected = choices[run.depth].chosen;
  } else {
    choices.push_back({0, candidates.size()});
  }
  ++run.depth;
  const std::size_t next = candidates[selected];
  if (current_runnable && next != run.current) {
    ++run.preemptions;
  }
  run.schedule += static_cast<char>('0' + next);
  return next;
}

}  // namespace

void schedule_point() noexcept {
  if (active == nullptr || active->free_running) {
    return;  // outside an exploration (e.g. static initialisation)
  }
  if (++active->steps > active->max_steps) {
    active->step_limit_hit = true;
  }
  switch_to_scheduler();
}

void park_on(const void* word, std::uint32_t expected, std::uint32_t current) noexcept {
  if (active == nullptr || active->free_running || current != expected) {
    return;  // the futex would not block
  }
  active->threads[active->current].parked_on = word;
  switch_to_scheduler();
}

void unpark_on(const void* word) noexcept {
  if (active == nullptr) {
    return;
  }
  for (logical_thread& thread : active->threads) {
    if (thread.parked_on == word) {
      thread.parked_on = nullptr;
    }
  }
}

exploration_result explore(const std::function<scenario()>& make, int preemption_bound,
                           std::uint64_t max_executions, std::size_t max_steps) {
  exploration_result result;
  std::vector<choice> choices;
  for (;;) {
    scenario current = make();
    execution run;
    run.choices = &choices;
    run.preemption_bound = preemption_bound;
    run.max_steps = max_steps;
    run.threads.resize(current.threads.size());
    for (std::size_t index = 0; index < current.threads.size(); ++index) {
      run.threads[index].fiber = context::fiber([&run, &current, index](context::fiber&& back) {
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
    for (;;) {
      if (run.step_limit_hit) {
        break;
      }
      const std::size_t next = pick_next(run);
      if (next == run.threads.size()) {
        break;  // everyone finished or parked
      }
      resume_thread(run, next);
    }
    std::vector<bool> parked(run.threads.size());
    for (std::size_t index = 0; index < run.threads.size(); ++index) {
      parked[index] = run.threads[index].parked_on != nullptr;
    }
    std::string verdict;
    run.free_running = true;
    if (!run.step_limit_hit) {
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
    if (!verdict.empty()) {
      result.failure = verdict;
      result.failing_schedule = run.schedule;
      return result;
    }
    // Backtrack: advance the deepest choice that has options left.
    while (!choices.empty() && choices.back().chosen + 1 >= choices.back().options) {
      choices.pop_back();
    }
    if (choices.empty()) {
      result.complete = true;
      return result;
    }
    ++choices.back().chosen;
    if (result.executions >= max_executions) {
      return result;
    }
  }
}

}  // namespace canopy::model
