// executor_core's workers: the worker loop (work, then the search with the
// sleep module until a park), the search in its documented order (LIFO
// slot, own offered child, yield queue, own partition, steals; yielded tasks
// go to the tree before a task from elsewhere runs), a task's
// run and what its outcome does to the slot, the driver poll, and the
// sleep probe a parker asks (must_stay_awake, about_to_block). When the
// search finds nothing, the worker asks fork-join (its join_worker) for an
// offer to steal.
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "../summary_tree/partition.hpp"
#include "core_inline.hpp"
#include "cpu_pinning.hpp"
#include "executor_core.hpp"
#include "host/host_runner.hpp"

namespace canopy::detail {

namespace {

std::uint64_t next_random(std::uint64_t& state) noexcept {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

}  // namespace

void executor_core::worker_main(std::size_t index) {
  worker_state& self = *workers_[index];
  if (!worker_cpus_.empty() && !pin_this_thread(worker_cpus_[index])) {
    std::fprintf(stderr, "canopy::executor: worker %zu could not be pinned to CPU %d: %s\n", index,
                 worker_cpus_[index], std::strerror(errno));
  }
  this_thread_worker = &self.context;
  self.joins.record_help_stack();
  trace_recorder::bind_this_thread(self.trace);
  idle_state idle;
  std::uint32_t slot = 0;
  while (!stopping_.load(atomics::acquire)) {
    if (find_task(self, slot)) {
      run_task(self, slot);
      poll_driver_if_due(self);
      continue;
    }
    if (const offer taken = self.joins.steal_from_others(); !taken.empty()) {
      self.joins.run_offer(taken, false);
      continue;
    }
    // Out of work: return reserved spawn slots so that a spawner blocked at
    // capacity is not kept waiting by slots nobody will use soon, and hand
    // the I/O requests this worker's tasks queued to the kernel, unless the
    // poller token is free: then the worker that takes it (this one, if it
    // parks) submits them with its wait, in the same system call. A token
    // taken by a poller that submitted before these requests were queued
    // is seen taken here (the driver's queue lock orders the two).
    // If the search finds work instead of parking, it submits before that
    // work runs, so a long task never holds back this worker's requests.
    give_back_worker_slots(self);
    const bool submit_deferred = config_.driver != nullptr && sleep_.poller_is_free();
    if (config_.driver != nullptr && !submit_deferred) {
      config_.driver->submit();
    }
    sleep_.start_looking(idle);
    if (self.trace != nullptr) {
      self.trace->search_started();
    }
    bool found = false;
    while (!stopping_.load(atomics::acquire)) {
      offer stolen;
      const bool from_tree = find_task(self, slot);
      if (from_tree || !(stolen = self.joins.steal_from_others()).empty()) {
        sleep_.work_found([this] { return tree_.any_active(); });
        found = true;
        if (submit_deferred) {
          config_.driver->submit();
        }
        if (self.trace != nullptr) {
          self.trace->search_ended();
        }
        if (from_tree) {
          run_task(self, slot);
        } else {
          self.joins.run_offer(stolen, false);
        }
        break;
      }
      const idle_report report = sleep_.no_work_found(index, idle, *this);
      if (report.holds_poller) {
        dispatch_as_poller();
      }
      if (report.parked) {
        if (self.trace != nullptr) {
          self.trace->park_ended(report.reason);
        }
        worker_counters::bump(self.counters.spurious_wakeups, report.spurious_wakeups);
        switch (report.reason) {
          case wake_reason::permit:
            worker_counters::bump(self.counters.wakes_by_permit);
            break;
          case wake_reason::jec:
            worker_counters::bump(self.counters.wakes_by_jec);
            break;
          case wake_reason::shutdown:
            worker_counters::bump(self.counters.wakes_by_shutdown);
            break;
          case wake_reason::io:  // the poller woke itself: counted in the reactor's stats
          case wake_reason::none:
            break;
        }
      }
    }
    if (!found) {
      if (self.trace != nullptr) {
        self.trace->search_ended();
      }
      sleep_.stop_looking();
    }
  }
  this_thread_worker = nullptr;
}

void executor_core::count_towards_driver_poll(worker_state& self) noexcept {
  // Every driver_poll_interval tasks for readiness (tokio's 61), and as soon
  // as a timer is due, completions wait or a task gave way to the others
  // under the I/O budget, so that a busy pool fires timers and delivers
  // completions and readiness within one task's run.
  if (++self.since_driver_poll < config_.driver_poll_interval && !self.context.driver_poll_wanted &&
      !config_.driver->completions_may_be_waiting() && !config_.driver->deadline_may_be_due()) {
    return;
  }
  self.since_driver_poll = 0;
  self.context.driver_poll_wanted = false;
  config_.driver->submit();
  // Only while no worker holds the poller role: a parked poller is woken by
  // readiness itself, and one dispatching is about to poll anyway.
  if (sleep_.try_take_poller()) {
    dispatch_as_poller();
  }
}

void executor_core::dispatch_as_poller() noexcept {
  trace_buffer* const trace = trace_ != nullptr ? trace_recorder::this_thread() : nullptr;
  const std::uint64_t trace_start = trace != nullptr ? trace->now() : 0;
  const std::size_t delivered = config_.driver->dispatch();
  if (trace != nullptr) {
    trace->reactor_poll(trace_start, static_cast<std::uint32_t>(delivered));
  }
  sleep_.release_poller();
}

bool executor_core::find_task(worker_state& self, std::uint32_t& slot) {
  // 0. The LIFO slot — the task this worker spawned or woke last — unless it
  //    has been taken too many times in a row: then the others go first once,
  //    so that a chain of spawns cannot starve the rest of the queue.
  //    After it, the newest child this worker offered (canopy::spawn) that
  //    its spawner did not take back: the same streak bounds both.
  if (self.lifo_streak < max_lifo_streak || self.yields.empty()) {
    std::uint32_t taken = self.lifo.take();
    if (taken != no_task || self.joins.take_own_task(taken)) {
      slot = taken;
      // Not from the yield queue: what waits there goes to the tree first,
      // so no yielded task waits behind this run (publish_yielded).
      if (!self.yields.empty()) [[unlikely]] {
        publish_yielded(self);
      }
      if (self.lifo_streak < max_lifo_streak) {
        ++self.lifo_streak;
        return true;
      }
      // Streak exhausted but nothing else is queued locally: fall through
      // to the tree first; keep the task if the tree has nothing.
      self.lifo_streak = 0;
      std::uint32_t other = 0;
      if (claim_from_roots(self, true, other)) {
        make_runnable(slot);  // back into the LIFO slot (evicts nothing: it is empty)
        slot = other;
      }
      return true;
    }
  }
  self.lifo_streak = 0;
  // 1. Local yield queue — unless the last task came from it, in which case
  //    the tree goes first so that yielding lets other ready tasks run.
  //    The empty test is inline: a call per search would cost every task
  //    that came from the tree.
  if (!self.last_from_yield && !self.yields.empty()) {
    if (take_yielded(self, slot)) {
      return true;
    }
  }
  // 2. Own partition. The yield queue is non-empty here only when the last
  //    task came from it; a task from the tree runs next, so the yielded
  //    tasks go to the tree first. (At step 3 the queue is empty: the take
  //    below emptied it or found it empty.)
  if (claim_from_roots(self, true, slot)) {
    if (!self.yields.empty()) [[unlikely]] {
      publish_yielded(self);
    }
    self.last_from_yield = false;
    return true;
  }
  if (!self.yields.empty() && take_yielded(self, slot)) {
    return true;
  }
  // 3. Steal from other partitions, starting at a random leaf, then from
  //    other workers' LIFO slots.
  if (workers_.size() > 1 && (claim_from_roots(self, false, slot) || steal_lifo(self, slot))) {
    worker_counters::bump(self.counters.steals);
    if (self.trace != nullptr) [[unlikely]] {
      self.trace->steal(self.steal_leaf == no_leaf ? trace_buffer::no_partition
                                                   : partition_owner(self.steal_leaf, partitions_));
    }
    self.last_from_yield = false;
    return true;
  }
  return false;
}

bool executor_core::take_yielded(worker_state& self, std::uint32_t& slot) {
  const auto yielded = self.yields.pop();
  if (!yielded) {
    return false;
  }
  slot = *yielded;
  self.last_from_yield = true;
  if (self.yields.empty() && !self.is_host) {
    sleep_.waker(self.context.index).unmark_yield();
  }
  return true;
}

// The worker is about to run a task that did not come from its yield queue:
// each yielded task gets its tree bit with the normal signal_task (a permit
// or JEC wake), so any worker may take it, and a sleeper is woken for it as
// for a spawn. Hence a yielded task waits for at most one other task run of
// its worker. Rare in a yield-heavy pool (the tree is then mostly empty and
// the queue feeds the worker), so out of line. The host role hands over the
// same way when it stops (host_runner::hand_over_local_work).
[[gnu::noinline]] void executor_core::publish_yielded(worker_state& self) noexcept {
  // SCHEDULED already: from the yield queue to the tree (invariant S).
  if (self.yields.hand_over([this](std::uint32_t yielded) { signal_task(yielded); }) &&
      !self.is_host) {
    sleep_.waker(self.context.index).unmark_yield();
  }
  self.last_from_yield = false;
}

bool executor_core::claim_from_roots(worker_state& self, bool own_partition, std::uint32_t& slot) {
  const std::size_t words = (arena_.leaf_limit() + 63) / 64;
  if (words == 0) {
    return false;
  }
  // A thief starts where its last steal succeeded, so that it empties one
  // leaf's words in order instead of taking one task from each of many: a
  // word it empties is one the spawner can reserve whole again. It starts at
  // a random leaf when it has none, which spreads thieves over victims.
  std::size_t start_leaf = self.cursor_leaf;
  if (!own_partition) {
    start_leaf =
        self.steal_leaf != no_leaf ? self.steal_leaf : next_random(self.random) % (words * 64);
  }
  std::size_t word = start_leaf / 64;
  if (word >= words) {
    word %= words;
  }
  const auto start_bit = static_cast<unsigned>(start_leaf % 64);
  // Own partition: the leaves of own_mask; stealing: the others.
  const std::uint64_t flip = own_partition ? 0 : ~std::uint64_t{0};
  // The start word is visited twice: bits at/after start_bit first, the
  // rest at the end, so every active leaf is tried once. The word index
  // wraps by a compare, not a division, and the two partial words are
  // masked outside the loop (a failed search is most of yield_many's).
  std::uint64_t active =
      tree_.root_word(word) & (self.own_mask[word] ^ flip) & (~std::uint64_t{0} << start_bit);
  for (std::size_t step = 0;;) {
    while (active != 0) {
      const std::size_t leaf = word * 64 + static_cast<std::size_t>(std::countr_zero(active));
      if (claim_in_leaf(leaf, slot)) {
        (own_partition ? self.cursor_leaf : self.steal_leaf) = leaf;
        return true;
      }
      active &= active - 1;
    }
    if (++step > words) {
      break;
    }
    word = word + 1 == words ? 0 : word + 1;
    active = tree_.root_word(word) & (self.own_mask[word] ^ flip);
    if (step == words) {
      active &= ~(~std::uint64_t{0} << start_bit);
    }
  }
  if (!own_partition) {
    self.steal_leaf = no_leaf;
  }
  return false;
}

bool executor_core::claim_in_leaf(std::size_t leaf, std::uint32_t& slot) {
  summary_tree::activation upward;
  const int index = tree_.claim_in_leaf(leaf, upward);
  owe_wakes(upward.wakes_owed);
  if (index < 0) {
    return false;
  }
  const auto within = static_cast<std::size_t>(index);
  slot = arena_.index_of(leaf, within / summary_tree::bits_per_word,
                         static_cast<unsigned>(within % summary_tree::bits_per_word));
  return true;
}

bool executor_core::steal_lifo(worker_state& self, std::uint32_t& slot) noexcept {
  const std::size_t workers = workers_.size();
  for (std::size_t step = 1; step < workers; ++step) {
    worker_state& victim = *workers_[(self.context.index + step) % workers];
    const std::uint32_t taken = victim.lifo.steal();
    if (taken != no_task) {
      slot = taken;
      return true;
    }
  }
  return false;
}

void executor_core::run_task(worker_state& self, std::uint32_t slot) {
  // One test of a pointer in the worker's own state when tracing is off
  // (docs/tracing.md has the instruction counts); the traced run is out of line.
  if (self.trace != nullptr) [[unlikely]] {
    run_task_traced(self, slot);
    return;
  }
  static_cast<void>(run_and_retire(self, slot));
}

[[gnu::noinline]] void executor_core::run_task_traced(worker_state& self, std::uint32_t slot) {
  const std::uint64_t started = self.trace->run_started();
  const run_outcome outcome = run_and_retire(self, slot);
  self.trace->run_ended(started, slot, outcome);
}

[[gnu::always_inline]] inline run_outcome executor_core::run_and_retire(worker_state& self,
                                                                        std::uint32_t slot) {
  task_slot& target = arena_.slot(slot);
  const std::uint32_t generation = task_slot::generation_of(target.state.load(atomics::relaxed));
  // relaxed: while SCHEDULED the claiming worker is the state's only writer
  // (schedulers find SCHEDULED and leave it); the claim RMW on the task bit
  // (or the yield queue, same thread) already ordered the body's writes.
  target.state.store(task_slot::make_state(generation, task_slot::executing), atomics::relaxed);
  self.context.running = {slot, generation};
  self.context.has_running = true;
  const run_outcome outcome = target.vtable->run(target.storage);
  self.context.has_running = false;
  worker_counters::bump(self.counters.tasks_run);
  switch (outcome) {
    case run_outcome::completed:
      target.vtable->destroy(target.storage, task_end::completed);
      target.vtable = nullptr;  // a reserved-but-unused slot has no vtable
      // release: a stale waker that reads the new generation fails its CAS;
      // the slot's teardown is published by arena_.release() below.
      target.state.store(task_slot::make_state(generation + 1, 0), atomics::release);
      worker_counters::bump(self.counters.finished);
      release_slot(self, slot);
      break;
    case run_outcome::suspended: {
      // acq_rel: acquire pairs with a waker's CAS that set SCHEDULED while
      // we ran (its writes are visible to the re-run); release pairs with
      // the next schedule() that finds IDLE.
      const std::uint64_t previous =
          target.state.fetch_and(~task_slot::executing, atomics::acq_rel);
      if ((previous & task_slot::scheduled) != 0) {
        signal_task(slot);  // woken while running: runnable once more
      }
      break;
    }
    case run_outcome::yielded:
      // SCHEDULED first, so a concurrent wake is absorbed instead of setting
      // the task bit while the task also sits in the yield queue (invariant S).
      target.state.fetch_or(task_slot::scheduled, atomics::acq_rel);
      target.state.fetch_and(~task_slot::executing, atomics::acq_rel);
      worker_counters::bump(self.counters.yields);
      if (self.yields.push(slot) && !self.is_host) {
        sleep_.waker(self.context.index).mark_yield();
      }
      break;
    case run_outcome::to_host:
      // As for a yield: SCHEDULED first (a concurrent wake is absorbed),
      // then the host channel's queue holds the task (invariant S).
      target.state.fetch_or(task_slot::scheduled, atomics::acq_rel);
      target.state.fetch_and(~task_slot::executing, atomics::acq_rel);
      host_->channel().push(slot);
      break;
  }
  return outcome;
}

bool executor_core::must_stay_awake(std::size_t worker) noexcept {
  if (stopping_.load(atomics::seq_cst)) {
    return true;
  }
  if (sleep_.waker(worker).sync_partition_summary(tree_, worker, config_.worker_count,
                                                  arena_.leaf_limit())) {
    return true;
  }
  return tree_.any_active() || any_offer_waiting();
}

bool executor_core::any_offer_waiting() const noexcept {
  // Not part of the no-lost-wakeup argument (a push orders nothing before
  // its wake's read: architecture.md, "Offered callables"). Read after this
  // parker's seq_cst counter and latch RMWs, it narrows the window in which
  // a parker misses an offered callable to the pusher's store reaching
  // memory, instead of the whole way from its last search to its park.
  for (const auto& worker : workers_) {
    if (!worker->joins.looks_empty()) {
      return true;
    }
  }
  return false;
}

void executor_core::about_to_block(std::size_t worker) noexcept {
  worker_counters::bump(workers_[worker]->counters.parks);
  if (trace_ != nullptr) {
    workers_[worker]->trace->park_started();
  }
  // seq_cst: pairs with shutdown step 2's store; see is_quiescent().
  if (draining_.load(atomics::seq_cst)) {
    const std::lock_guard lock(drain_mutex_);
    drain_cv_.notify_all();
  }
}

}  // namespace canopy::detail
