// task_state_fuzz — the task state machine (task_slot.hpp) driven through the
// real executor_core by random sequences of spawn, wake, wake while running,
// wakes absorbed while runnable, stale-generation wakes, spawns from inside a
// run, and a final shutdown (drain or cancel_pending), against a reference
// that predicts how often each task runs and how it is destroyed.
//
// One worker thread keeps the schedule deterministic: the fuzzer thread waits
// after every step until the reference's expected runs have finished, and a
// task can be held inside its run (the worker blocked in it) to wake it, or
// other tasks, while it is EXECUTING.
//
// Reference rules (task_slot.hpp's transitions):
//   * a run ends as the task's plan says: completed, suspended or yielded
//     (no plan: suspended); a yielded task runs again by itself;
//   * a wake of a suspended task adds one run; wakes of a task that is
//     already SCHEDULED are absorbed; any number of wakes while it runs add
//     exactly one run after it, unless that run completed it;
//   * a wake with a stale generation (the task completed) returns false and
//     runs nothing, even when the slot holds a new task;
//   * every task's body is destroyed exactly once: `completed` after its
//     completing run, `dropped` at shutdown otherwise; dropped_tasks counts
//     the dropped ones.
// Any violation, or a wait longer than 10 s, aborts with a message.
#include <fuzzer/FuzzedDataProvider.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "executor/scheduler.hpp"

namespace {

[[noreturn]] void fail(const char* what, long detail) {
  std::fprintf(stderr, "task_state_fuzz: %s (detail %ld)\n", what, detail);
  std::abort();
}

template <class Predicate>
void wait_until(Predicate done, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      fail(what, 0);
    }
    std::this_thread::yield();
  }
}

struct task_record;

// The fuzzer's state, shared with task bodies (which run on the worker).
struct fuzz_world {
  canopy::detail::scheduler* core = nullptr;
  std::vector<std::unique_ptr<task_record>> records;
  std::mutex mutex;  // guards plans and records (the worker appends children)
};

struct task_record {
  fuzz_world* world = nullptr;
  std::size_t number = 0;
  canopy::detail::task_id id{};
  std::deque<canopy::detail::run_outcome>
      plan;                              // outcomes of the next runs (guarded by world->mutex)
  bool spawn_child_next_run = false;     // guarded by world->mutex
  std::atomic<bool> hold{false};         // block the next run until released
  std::atomic<bool> held{false};         // a run is blocked in hold
  std::atomic<int> runs_started{0};
  std::atomic<int> runs_finished{0};
  std::atomic<int> destroyed_completed{0};
  std::atomic<int> destroyed_dropped{0};
  int expected_runs = 0;   // reference (fuzzer thread)
  bool completed = false;  // reference: its completing run is expected or done
};

// The body stored in a slot: a pointer to its record.
struct body {
  task_record* record;
};

canopy::detail::task_id spawn_record(fuzz_world& world, task_record& record);

canopy::detail::run_outcome run_body(void* storage) {
  task_record& record = *static_cast<body*>(storage)->record;
  record.runs_started.fetch_add(1);
  if (record.hold.load()) {
    record.held.store(true);
    wait_until([&] { return !record.hold.load(); }, "a held run was never released");
    record.held.store(false);
  }
  canopy::detail::run_outcome outcome = canopy::detail::run_outcome::suspended;
  task_record* child = nullptr;
  {
    const std::lock_guard lock(record.world->mutex);
    if (!record.plan.empty()) {
      outcome = record.plan.front();
      record.plan.pop_front();
    }
    if (record.spawn_child_next_run) {
      record.spawn_child_next_run = false;
      child = record.world->records.back().get();  // prepared by the fuzzer thread
    }
  }
  if (child != nullptr) {
    // A spawn on the worker: into its LIFO slot (evicting the previous one).
    child->id = spawn_record(*record.world, *child);
  }
  record.runs_finished.fetch_add(1);
  return outcome;
}

void destroy_body(void* storage, canopy::detail::task_end end) noexcept {
  task_record& record = *static_cast<body*>(storage)->record;
  (end == canopy::detail::task_end::completed ? record.destroyed_completed
                                              : record.destroyed_dropped)
      .fetch_add(1);
}

constexpr canopy::detail::task_vtable record_vtable{&run_body, &destroy_body};

canopy::detail::task_id spawn_record(fuzz_world& world, task_record& record) {
  canopy::detail::task_id id{};
  const auto status = world.core->spawn_body(
      &record_vtable,
      [](void* storage, void* context) { new (storage) body{static_cast<task_record*>(context)}; },
      &record, canopy::detail::spawn_mode::fail, &id);
  if (status != canopy::detail::spawn_status::spawned) {
    fail("spawn failed far below capacity", static_cast<long>(status));
  }
  return id;
}

// Reference: the runs a wake (or a spawn) of `record` adds, walking its plan
// from entry `from` on (the entries before it belong to runs already counted).
int predict_runs(fuzz_world& world, task_record& record, std::size_t from = 0) {
  const std::lock_guard lock(world.mutex);
  int runs = 0;
  for (std::size_t step = from;; ++step) {
    ++runs;
    const auto outcome =
        step < record.plan.size() ? record.plan[step] : canopy::detail::run_outcome::suspended;
    if (outcome == canopy::detail::run_outcome::completed) {
      record.completed = true;
      return runs;
    }
    if (outcome == canopy::detail::run_outcome::suspended) {
      return runs;
    }
  }
}

void settle(fuzz_world& world) {
  for (auto& record : world.records) {
    wait_until([&] { return record->runs_finished.load() >= record->expected_runs; },
               "a task never ran as often as the reference expects (lost wake?)");
    if (record->runs_started.load() > record->expected_runs) {
      fail("a task ran more often than the reference allows",
           record->runs_started.load() - record->expected_runs);
    }
    if (record->completed) {
      wait_until([&] { return record->destroyed_completed.load() == 1; },
                 "a completed task's body was not destroyed");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  canopy::executor_config config;
  config.worker_count = 1;
  config.signals_per_leaf = 1;
  config.max_leaves = 4;
  config.idle_yield_rounds = input.ConsumeIntegralInRange<std::uint32_t>(0, 2);
  config.on_shutdown = input.ConsumeBool() ? canopy::shutdown_policy::drain
                                           : canopy::shutdown_policy::cancel_pending;
  fuzz_world world;
  canopy::detail::owned_scheduler core = canopy::detail::make_scheduler(config);
  world.core = core.get();
  constexpr std::size_t max_tasks = 40;
  std::vector<canopy::detail::task_id> stale_ids;

  const auto new_record = [&]() -> task_record& {
    auto record = std::make_unique<task_record>();
    record->world = &world;
    record->number = world.records.size();
    const std::lock_guard lock(world.mutex);
    world.records.push_back(std::move(record));
    return *world.records.back();
  };
  const auto live_record = [&](std::size_t pick) -> task_record* {
    // The pick-th task that has not completed, if any.
    std::vector<task_record*> live;
    for (auto& record : world.records) {
      if (!record->completed) {
        live.push_back(record.get());
      }
    }
    return live.empty() ? nullptr : live[pick % live.size()];
  };
  const auto wake = [&](task_record& record) {
    if (!core->schedule(record.id)) {
      fail("wake of a live task returned false", static_cast<long>(record.number));
    }
  };

  int steps = 0;
  while (input.remaining_bytes() > 0 && steps++ < 256) {
    const auto op = input.ConsumeIntegralInRange<unsigned>(0, 7);
    const auto pick = input.ConsumeIntegral<std::uint8_t>();
    switch (op) {
      case 0: {  // spawn from outside
        if (world.records.size() >= max_tasks) {
          break;
        }
        task_record& record = new_record();
        record.expected_runs = predict_runs(world, record);
        record.id = spawn_record(world, record);
        break;
      }
      case 1: {  // plan the next outcome of a task
        if (task_record* record = live_record(pick)) {
          const auto outcome =
              static_cast<canopy::detail::run_outcome>(input.ConsumeIntegralInRange(0, 2));
          const std::lock_guard lock(world.mutex);
          if (record->plan.size() < 4) {
            record->plan.push_back(outcome);
          }
        }
        break;
      }
      case 2: {  // wake a suspended task
        if (task_record* record = live_record(pick)) {
          record->expected_runs += predict_runs(world, *record);
          wake(*record);
        }
        break;
      }
      case 3: {  // wakes while it runs: any number add exactly one run
        task_record* record = live_record(pick);
        if (record == nullptr) {
          break;
        }
        record->hold.store(true);
        canopy::detail::run_outcome first = canopy::detail::run_outcome::suspended;
        {
          const std::lock_guard lock(world.mutex);
          if (!record->plan.empty()) {
            first = record->plan.front();
          }
        }
        record->expected_runs += predict_runs(world, *record);
        wake(*record);
        wait_until([&] { return record->held.load(); }, "a woken task never started its run");
        const int wakes = input.ConsumeIntegralInRange(1, 3);
        for (int index = 0; index < wakes; ++index) {
          wake(*record);  // EXECUTING: no bit now; SCHEDULED is kept for the run's end
        }
        // A run that suspends is re-signalled once for all those wakes (a
        // new walk from the next plan entry); a run that yields was going to
        // run again anyway (the wakes are absorbed); a completing run drops
        // them. Predicted before the release: the run pops its plan entry.
        if (first == canopy::detail::run_outcome::suspended) {
          record->expected_runs += predict_runs(world, *record, 1);
        }
        record->hold.store(false);
        break;
      }
      case 4: {  // wakes absorbed while runnable: the worker is held in another task
        task_record* blocker = live_record(pick);
        task_record* target = live_record(input.ConsumeIntegral<std::uint8_t>());
        if (blocker == nullptr || target == nullptr || blocker == target) {
          break;
        }
        blocker->hold.store(true);
        blocker->expected_runs += predict_runs(world, *blocker);
        wake(*blocker);
        wait_until([&] { return blocker->held.load(); }, "a woken task never started its run");
        target->expected_runs += predict_runs(world, *target);
        const int wakes = input.ConsumeIntegralInRange(1, 3);
        for (int index = 0; index < wakes; ++index) {
          wake(*target);  // SCHEDULED, not running: every wake after the first is absorbed
        }
        for (const canopy::detail::task_id stale : stale_ids) {
          if (core->schedule(stale)) {
            fail("a stale-generation wake returned true", stale.slot);
          }
        }
        blocker->hold.store(false);
        break;
      }
      case 5: {  // stale-generation wakes (slots may hold new tasks now)
        for (const canopy::detail::task_id stale : stale_ids) {
          if (core->schedule(stale)) {
            fail("a stale-generation wake returned true", stale.slot);
          }
        }
        break;
      }
      case 6: {  // a run that spawns a child on the worker (LIFO slot path)
        task_record* parent = live_record(pick);
        if (parent == nullptr || world.records.size() >= max_tasks) {
          break;
        }
        parent->expected_runs += predict_runs(world, *parent);
        task_record& child = new_record();
        child.expected_runs = predict_runs(world, child);
        {
          const std::lock_guard lock(world.mutex);
          parent->spawn_child_next_run = true;
        }
        wake(*parent);
        break;
      }
      default:
        break;
    }
    settle(world);
    for (auto& record : world.records) {
      if (record->completed && record->destroyed_completed.load() == 1) {
        bool known = false;
        for (const canopy::detail::task_id stale : stale_ids) {
          known =
              known || (stale.slot == record->id.slot && stale.generation == record->id.generation);
        }
        if (!known) {
          stale_ids.push_back(record->id);
        }
      }
    }
  }

  // End: leave some tasks runnable, then shut down under the chosen policy.
  const int pending_wakes = input.ConsumeIntegralInRange(0, 3);
  for (int index = 0; index < pending_wakes; ++index) {
    if (task_record* record = live_record(input.ConsumeIntegral<std::uint8_t>())) {
      {
        const std::lock_guard lock(world.mutex);
        record->plan.clear();  // its next run suspends
      }
      if (record->runs_finished.load() == record->expected_runs) {
        record->expected_runs += 1;  // at most: cancel_pending may drop it first
        wake(*record);
      }
    }
  }
  core->shutdown();
  std::uint64_t dropped = 0;
  for (auto& record : world.records) {
    const int completed = record->destroyed_completed.load();
    const int dropped_here = record->destroyed_dropped.load();
    if (completed + dropped_here != 1) {
      fail("a task's body was not destroyed exactly once",
           static_cast<long>(record->number * 100 + completed * 10 + dropped_here));
    }
    if (record->completed != (completed == 1)) {
      fail("a task completed against the reference", static_cast<long>(record->number));
    }
    if (record->runs_started.load() > record->expected_runs ||
        record->runs_started.load() != record->runs_finished.load()) {
      fail("a task ran more often than the reference allows", static_cast<long>(record->number));
    }
    if (config.on_shutdown == canopy::shutdown_policy::drain &&
        record->runs_finished.load() != record->expected_runs) {
      fail("drain: a runnable task was dropped without its run", static_cast<long>(record->number));
    }
    dropped += static_cast<std::uint64_t>(dropped_here);
  }
  if (core->stats().dropped_tasks != dropped) {
    fail("stats().dropped_tasks differs from the bodies dropped",
         static_cast<long>(core->stats().dropped_tasks) - static_cast<long>(dropped));
  }
  return 0;
}
