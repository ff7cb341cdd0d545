#!/usr/bin/env bash
# mutants.sh — re-check that the model check can fail: for each safety step
# of the wake protocol, build tests/model_check_test against a copy of the
# sources with that step removed, and report whether the checker rejects it.
#
#   tests/model/mutants.sh [--model-only] [--filter=REGEX]
#                 (from the repository root; ./run.sh test --mutants and CI
#                 run both tables, ./run.sh test --mutants=model the first)
#   --model-only  the model-check table only, not the Relacy one
#   --filter=R    only the rows whose name matches the extended regex R (the
#                 real sources' row of each table always runs); a filter
#                 that matches no row is an error
#
# The working tree is never modified: each mutant is applied to a copy in a
# scratch folder. A mutant whose pattern no longer matches the source is a
# failure too (the table must follow the code). An order that only matters
# on a weaker memory model than the sequentially consistent one the checker
# explores is not in the first table: the Relacy table below covers memory
# orders. Each row builds again only the units whose dependency list names
# the file the mutant changes, and links the rest from the real sources'
# build; rows run side by side, as many as there are cores (MUTANTS_ROWS),
# each in a copy of the sources of its own, and the table is printed in
# its order once every row has run.
# The wakes that hand a backlog to a sleeper while the awake workers are busy
# (the JEC wake in new_jobs, the chain wake in work_found) are not needed for
# "no lost wake-up"; the liveness cases (each worker runs a long task after
# its first claim; no execution may end with a task waiting while a worker
# sleeps) are what reject the chain wake. The JEC wake is "not-needed" there:
# with work_found's look after its decrement, a visible task and a sleeper
# always leave an awake idle worker to look again, so the JEC wake only makes
# the wake earlier (docs/correctness.md); the checker must pass without it.
# The "ring:" rows mutate the model's own copy of the reactor's io_uring
# park path (tests/model/model_ring_reactor.hpp mirrors wait_on_ring,
# arm_watches, complete and wait_until_reaped step for step, and
# model_ring_test.cpp the worker loop's submits; the real io/uring sources
# need liburing and the kernel): when those functions change, the copy must
# follow them. "not-needed": a false return for a socket completion that
# wait() kept (the next wait() returns true at once, its first check), and
# an out-of-work submit made whether or not the poller token is taken (the
# code before 39974a2: one io_uring_enter more, never a lost request).
# The "fork-join:" rows mutate the real protocol (coroutine/fork_region.hpp,
# its stack hand-over included, the empty stack a run begins on in
# executor/fork_stack.hpp's enter_stack_run, and the cancel check of
# coroutine/fork_join_await.hpp's fork_join_awaiter::start_one),
# which tests/model/model_fork_join_test.cpp and, for the memory orders,
# tests/relacy/fork_join_relacy.cpp run. An uncounted steal is caught by
# the nested, throw and cancel cases only: in a flat two-child join the
# opening task goes on after its worker's own child ended whatever the
# count says, so an early end of the root join is not observable there.
# Exit status: 0 when every "caught" mutant was caught and every mutant
# applied; 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."

only_model=false
filter=""
for argument in "$@"; do
  case "$argument" in
    --model-only) only_model=true ;;
    --filter=*) filter=${argument#--filter=} ;;
    *)
      echo "mutants.sh: unknown option '$argument' (use --model-only, --filter=REGEX)" >&2
      exit 2
      ;;
  esac
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cxx=${CXX:-g++}
jobs=${MUTANTS_JOBS:-$(nproc)}
row_jobs=${MUTANTS_ROWS:-$(nproc)}
compile_jobs=$jobs

# name % file % perl substitution (applied with -0pe) % expected: caught / not-needed
#   [% first: the cases that catch it, a doctest --test-case filter]
# A caught row's checker runs the "first" cases before all of them: in
# name order the cases that catch a mutant can come after a minute of
# cases that pass, and most rows are caught by the cases of their own
# component. If those pass, every case runs, as for a row without
# "first", so the verdict does not depend on it; a filter that matches no
# case is a failure of the row (the table must follow the test names).
# (The generation and state check of claim_pending_task is the only guard of
# its LIFO path: canopy::join's take-back claims a callable's task without
# knowing it ended, and the joiner may have put its slot's next task into its
# own LIFO slot; model_executor_test's take-back case. On the tree path the
# re-read after the claim would catch a reused slot too.)
mutants=(
  "try_sleep's final probe (must_stay_awake) removed%signal_waker/sleep_module.cpp%s/if \(permits_\.try_acquire\(\) \|\| probe\.must_stay_awake\(worker\)\) \{/if (permits_.try_acquire()) {/%caught%model executor: *"
  "deactivate_root's re-check of the leaf removed%summary_tree/summary_tree.cpp%s/if \(leaf_words_\[leaf\]\.value\.load\(atomics::seq_cst\) != 0\) \{\n    return activate_root\(leaf\);/if (false) {\n    return activate_root(leaf);/%caught%model executor: *"
  "mark_signal_inactive's re-check of the signal word removed%summary_tree/summary_tree.cpp%s/if \(signal_words_\[leaf \* signals_per_leaf_ \+ signal\]\.load\(atomics::seq_cst\) != 0\) \{/if (false) {/%caught%model executor: *"
  "stale-bit repair in claim_in_leaf and claim_task_bit removed%summary_tree/summary_tree.cpp%s/if \(\(root_words_\[leaf \/ bits_per_word\]\.value\.load\(atomics::relaxed\) & bit_of\(leaf\)\) != 0\) \{/if (false) {/; s/if \(\(leaf_words_\[leaf\]\.value\.load\(atomics::relaxed\) & bit_of\(signal\)\) != 0\) \{/if (false) {/%caught%model executor: *"
  "new_jobs never wakes a sleeper (JEC path removed)%signal_waker/sleep_module.cpp%s/return wake_any\(std::min\(jobs - awake_but_idle, sleeping\), wake_reason::jec\);/return 0;/%not-needed"
  "work_found never wakes a sleeper (the chain wake removed)%signal_waker/sleep_module.hpp%s/if \(after\.sleeping\(\) > 0 && after\.awake_but_idle\(\) == 0 && more_work_visible\(\)\) \{/if (false) {/%caught%model: a backlog*"
  "work_found looks at the tree before it stops counting itself idle%signal_waker/sleep_module.hpp%s/const atomic_counters::counters after = counters_\.sub_inactive\(\);\n    if \(after\.sleeping\(\) > 0 && after\.awake_but_idle\(\) == 0 && more_work_visible\(\)\) \{/const bool seen_before = more_work_visible();\n    const atomic_counters::counters after = counters_.sub_inactive();\n    if (after.sleeping() > 0 && after.awake_but_idle() == 0 && seen_before) {/%caught%model: liveness*"
  "host: re-check for work after arming removed%executor/host/host_channel.hpp%s/if \(has_work\(\)\) \{/if (false) {/%caught%model: the host*"
  "host: push notifies before it publishes the task%executor/host/host_channel.cpp%s/queued_\.fetch_add\(1, atomics::seq_cst\);\n  notify\(\);/notify();\n  queued_.fetch_add(1, atomics::seq_cst);/%caught%model: the host*"
  "host: disarm forgets the write of a poster that took the flag%executor/host/host_channel.cpp%s/if \(!armed_\.exchange\(false, atomics::seq_cst\)\) \{\n    \+\+expected_writes_;/if (!armed_.exchange(false, atomics::seq_cst)) {\n/%caught%model: the host*"
  "host: notify writes without taking the armed flag%executor/host/host_channel.cpp%s/if \(armed_\.load\(atomics::seq_cst\) && armed_\.exchange\(false, atomics::seq_cst\)\) \{/if (armed_.load(atomics::seq_cst)) {/%caught%model: the host*"
  "poller: wakers never claim a sleeper parked in the driver%signal_waker/sleep_module.cpp%s/if \(pass == 0 && waker\.parks_on_other_backend\(\)\) \{/if (waker.parks_on_other_backend()) {/%caught%model poller: *"
  "poller: a parking worker never takes the poller token%signal_waker/sleep_module.cpp%s/const bool polling = poller_backend_ != nullptr && try_take_poller\(\);/const bool polling = false;/%caught%model poller: *"
  "poller: a self-claiming poller skips the sleeper bookkeeping%signal_waker/sleep_module.cpp%s/if \(self_claimed\) \{\n    forget_sleeper\(\);/if (false) {\n    forget_sleeper();/%caught%model poller: *"
  "poller: an aborted park keeps the poller token%signal_waker/sleep_module.cpp%s/(latch\.abort_sleep\(\)\) \{\n      forget_sleeper\(\);\n    \}[^\n]*\n    latch\.reset\(\);\n)    if \(polling\) \{\n      release_poller\(\);\n    \}\n/\$1/%caught%model poller: *"
  "LIFO: a thief's steal loads and stores instead of the exchange%executor/lifo_slot.hpp%s/(steal\(\) noexcept \{[\s\S]*?)return word_\.exchange\(empty, atomics::acquire\);/\$1const std::uint32_t seen = word_.load(atomics::relaxed);\n    word_.store(empty, atomics::relaxed);\n    return seen;/%caught%model executor: *"
  "LIFO: put stores over the slot (the evicted task is never returned)%executor/lifo_slot.hpp%s/return word_\.exchange\(slot, atomics::acq_rel\);/word_.store(slot, atomics::release);\n    return empty;/%caught%model executor: *"
  "run-at-join: take_if_is loads and stores instead of the CAS%executor/lifo_slot.hpp%s/word_\.compare_exchange_strong\(expected, empty, atomics::acquire, atomics::relaxed\)/(static_cast<void>(expected), word_.store(empty, atomics::relaxed), true)/%caught%model executor: canopy::join*,model executor: run-at-join*"
  "run-at-join: no re-read of the state after a tree claim%executor/pending_claim.hpp%s/if \(task_slot::generation_of\(state\.load\(atomics::relaxed\)\) != id\.generation\) \{\n    return pending_claim::took_next_task;/if (false) {\n    return pending_claim::took_next_task;/%caught%model executor: canopy::join*,model executor: run-at-join*"
  "run-at-join: claim_pending skips the generation and state check%executor/pending_claim.hpp%s/if \(task_slot::generation_of\(seen\) != id\.generation \|\|\n      \(seen & task_slot::flag_mask\) != task_slot::scheduled\) \{/if (false) {/%caught%model executor: canopy::join*,model executor: run-at-join*"
  "yield queue: hand_over keeps its tasks (a yielded task waits while a worker sleeps)%executor/yield_queue.hpp%s/for \(const std::uint32_t slot : slots_\) \{\n      signal\(slot\);\n    \}\n    slots_\.clear\(\);\n    return true;/static_cast<void>(signal);\n    return false;/%caught%model executor: *"
  "task_sync: a receiver arms without re-checking the ring under the lock%task_sync/channel_core.hpp%s/if \(size_ > reserved_\) \{\n      \+\+reserved_;\n      node\.finish\(waiter_done\);/if (false) {\n      ++reserved_;\n      node.finish(waiter_done);/%caught%model task_sync: *"
  "task_sync: a sender arms without re-checking for room under the lock%task_sync/channel_core.hpp%s/if \(size_ < capacity_\) \{\n        push_locked/if (false) {\n        push_locked/%caught%model task_sync: *"
  "task_sync: semaphore release adds permits without looking for waiters%task_sync/semaphore_core.hpp%s/while \(\(seen & 1\) == 0\) \{\n      if \(\(seen >> 1\) \+ n > max_\)/while (true) {\n      if ((seen >> 1) + n > max_)/%caught%model task_sync: *"
  "futex_mutex: unlock never wakes a sleeper (the word was 2)%atomics/futex_mutex.hpp%s/      futex_wake_one\(word_\);\n//%caught%model sync: *"
  "futex_mutex: a spinning locker takes the word with a store, not a CAS%atomics/futex_mutex.hpp%s/if \(word_\.compare_exchange_strong\(expected, taken, acquire, relaxed\)\) \{\n          return;/if ((static_cast<void>(expected), word_.store(taken, relaxed), true)) {\n          return;/%caught%model sync: *"
  "drain: the second pass of the quiescence check removed%executor/drain_check.hpp%s/if \(sleep\.waker\(index\)\.latch\(\)\.word\(\)\.load\(atomics::seq_cst\) != sleep_latch::sleeping \|\|\n        sleep\.park_epoch\(index\) != epochs\[index\]\) \{/if (false) {/%caught%model executor: drain*"
  "ring: a worker out of work does not submit its tasks' requests%tests/model/model_ring_test.cpp%s/        if \(!sleep_\.poller_is_free\(\)\) \{\n          driver_\.submit\(\);\n        \}\n//%caught%model ring: *"
  "ring: a worker out of work submits whether or not the token is taken%tests/model/model_ring_test.cpp%s/        if \(!sleep_\.poller_is_free\(\)\) \{\n          driver_\.submit\(\);\n        \}/        driver_.submit();/%not-needed"
  "ring: a worker out of work submits only while the token is free%tests/model/model_ring_test.cpp%s/        if \(!sleep_\.poller_is_free\(\)\) \{\n          driver_\.submit\(\);/        if (sleep_.poller_is_free()) {\n          driver_.submit();/%caught%model ring: *"
  "ring: the poller's wait does not flush the submission queue%tests/model/model_ring_reactor.hpp%s/kernel_\.enter\(kernel_\.publish\(\), \/\*wait=\*\/true\);/kernel_.enter(0, \/*wait=*\/true);/%caught%model ring: *"
  "ring: wait() returns true for a wake completion%tests/model/model_ring_reactor.hpp%s/(if \(entry->from == model_cqe::source::wake\) \{  \/\/ wait_on_ring: user_data == wake_tag\n        complete\(\*entry, nullptr\);)/\$1\n        collected = true;/%caught%model ring: *"
  "ring: wait() returns false for a socket completion it kept%tests/model/model_ring_reactor.hpp%s/    return collected;\n  \}\n\n  \/\/ reactor::notify/    return false;\n  }\n\n  \/\/ reactor::notify/%not-needed"
  "ring: wait() reaps a socket completion without keeping it%tests/model/model_ring_reactor.hpp%s/        pending_ = entry;\n        collected = true;/        collected = true;/%caught%model ring: *"
  "ring: a poll that ended is never armed again (the watch flag kept)%tests/model/model_ring_reactor.hpp%s/eventfd_watched_ = eventfd_watched_ && entry\.more;/eventfd_watched_ = eventfd_watched_;/%caught%model ring: *"
  "ring: a canceller that takes a wake-up does not notify again%tests/model/model_ring_reactor.hpp%s/        notify\(\);  \/\/ wait_until_reaped: the wake-up it took[^\n]*\n//%caught%model ring: *"
  "ring: a canceller reaps while the poller waits (poller_waiting_ ignored)%tests/model/model_ring_reactor.hpp%s/const bool reaped = !poller_waiting_;/const bool reaped = true;/%caught%model ring: *"
  "fork-join: a child's end skips the pop and always decrements%coroutine/fork_region.hpp%s/if \(link\.offered && !take_back_from_thieves\(record\)\) \{/if (link.offered) {/; s/if \(run == child_run::ended_offered && !take_back_from_thieves\(\*this\)\) \{/if (run == child_run::ended_offered) {/%caught%fork-join: *"
  "fork-join: the join subtracts k_max, not k_max - steals%coroutine/fork_region.hpp%s/const std::uint32_t mine = k_max - steals_;/const std::uint32_t mine = k_max;/%caught%fork-join: *"
  "fork-join: a thief does not count its steal (++steals_ removed)%coroutine/fork_region.hpp%s/    \+\+record\.steals_;[^\n]*\n//%caught%fork-join: *"
  "fork-join: leave() loads then stores, not one exchange%coroutine/fork_region.hpp%s/return state_\.exchange\(opener_left, atomics::acq_rel\) == done;/const bool ended = state_.load(atomics::acquire) == done;\n    state_.store(opener_left, atomics::release);\n    return ended;/%caught%fork-join: *"
  "fork-join: finish() loads then stores, not one exchange%coroutine/fork_region.hpp%s/if \(state_\.exchange\(done, atomics::acq_rel\) == opener_left\) \{/const bool left = state_.load(atomics::acquire) == opener_left;\n    state_.store(done, atomics::release);\n    if (left) {/%caught%fork-join: *"
  "fork-join: leave() stores, and H never goes on in its run%coroutine/fork_region.hpp%s/return state_\.exchange\(opener_left, atomics::acq_rel\) == done;/state_.store(opener_left, atomics::release);\n    return false;/%caught%fork-join: *"
  "fork-join: finish() wakes H whatever leave() saw (both go on)%coroutine/fork_region.hpp%s/if \(state_\.exchange\(done, atomics::acq_rel\) == opener_left\) \{/if ((static_cast<void>(state_.exchange(done, atomics::acq_rel)), true)) {/%caught%fork-join: *"
  "fork-join: finish() reads the core and the task after its exchange%coroutine/fork_region.hpp%s/    scheduler& core = \\*core_;\n    const task_id task = task_;\n//; s/wake_region_task\\(core, task\\);/wake_region_task(*core_, task_);/%caught%fork-join: *"
  "fork-join: a child is launched without the cancel check%coroutine/fork_join_await.hpp%s/    if \(cancelled\(\)\) \{\n      slot\.error = std::make_exception_ptr\(task_cancelled\(\)\);\n      return child_run::ended;\n    \}\n//%caught%fork-join: *"
  "fork-join: the loser keeps a stack that holds frames (release_stack removed)%coroutine/fork_region.hpp%s/release_stack\(\);  \/\/ the winner adopts it/static_cast<void>(0);/g%caught%fork-join: *"
  "fork-join: the winner does not adopt the joining frame's stack%coroutine/fork_region.hpp%s/      adopt_stack\(stack_\);/      static_cast<void>(stack_);/%caught%fork-join: *"
  "fork-join: a deferred join is never run (drive() drops it)%coroutine/region_run.hpp%s/if \(here\.deferred == nullptr\) \{\n      return;/if (true) {\n      return;/%caught%fork-join: joins left*"
  "fork-join: a deferred join's children run nested all the same%coroutine/fork_region.hpp%s/here\.deferred_rest = &deferred_rest<Start>;\n        return \{\};/here.deferred_rest = &deferred_rest<Start>;/%caught%fork-join: joins left*"
  "fork-join: a nested steal runs on the non-empty stack%executor/fork_stack.hpp%s/(const stack_run_outer outer\{here\.top, here\.cache\};\n)  here\.top = nullptr;\n/\$1/%caught%fork-join: a nested steal*"
)

# The same idea under Relacy's weak-memory simulation
# (tests/relacy/wake_protocol_relacy.cpp, CANOPY_RELACY): memory orders.
# "caught": Relacy must report the lost wake-up. The protocol has no fences
# since the three in sleep_module were shown not needed (docs/correctness.md,
# "Memory orders"); the argument rests on seq_cst RMWs and seq_cst loads, and
# weakening the two the lost-wakeup argument names is rejected.
relacy_mutants=(
  "activate_root's root RMW (fetch_or) seq_cst -> acq_rel%summary_tree/summary_tree.cpp%s/root_words_\[leaf \/ bits_per_word\]\.value\.fetch_or\(mask, atomics::seq_cst\)/root_words_[leaf \/ bits_per_word].value.fetch_or(mask, atomics::acq_rel)/%caught"
  "the final probe's root load (any_active) seq_cst -> acquire%summary_tree/summary_tree.cpp%s/if \(root_words_\[index\]\.value\.load\(atomics::seq_cst\) != 0\)/if (root_words_[index].value.load(atomics::acquire) != 0)/%caught"
  "futex_mutex: lock's uncontended CAS acquire -> relaxed%atomics/futex_mutex.hpp%s/if \(word_\.compare_exchange_strong\(expected, taken, acquire, relaxed\)\) \[\[likely\]\] \{/if (word_.compare_exchange_strong(expected, taken, relaxed, relaxed)) [[likely]] {/%caught"
  "futex_mutex: unlock's exchange release -> relaxed%atomics/futex_mutex.hpp%s/word_\.exchange\(free, release\)/word_.exchange(free, relaxed)/%caught"
  "offer_deque: pop's exchange on bottom -> relaxed store%executor/offer_deque.hpp%s/static_cast<void>\(bottom_\.exchange\(bottom, atomics::seq_cst\)\);/bottom_.store(bottom, atomics::relaxed);/%caught"
  "offer_deque: pop's load of top seq_cst -> acquire%executor/offer_deque.hpp%s/std::int64_t top = top_\.load\(atomics::seq_cst\);\n    if \(top > bottom\)/std::int64_t top = top_.load(atomics::acquire);\n    if (top > bottom)/%caught"
  "offer_deque: push publishes bottom relaxed, not release%executor/offer_deque.hpp%s/bottom_\.store\(bottom \+ 1, atomics::release\);/bottom_.store(bottom + 1, atomics::relaxed);/%caught"
  "fork-join: a child's counted end's fetch_sub acq_rel -> relaxed%coroutine/fork_region.hpp%s/if \(joins_\.fetch_sub\(1, atomics::acq_rel\) == 1\) \{/if (joins_.fetch_sub(1, atomics::relaxed) == 1) {/%caught"
  "fork-join: the loser reads the joining stack after its fetch_sub%coroutine/fork_region.hpp%s/const bool holds_frames = stack_in_use\(\) != nullptr;\n    if \(joins_\.fetch_sub\(1, atomics::acq_rel\) == 1\) \{/const bool last = joins_.fetch_sub(1, atomics::acq_rel) == 1;\n    const bool holds_frames = stack_in_use() != nullptr;\n    if (last) {/%caught%relacy: fork-join stacklet hand-over*"
  "fork-join: join's fetch_sub acq_rel -> release (winner reads early)%coroutine/fork_region.hpp%s/if \(joins_\.fetch_sub\(mine, atomics::acq_rel\) == mine\) \{/if (joins_.fetch_sub(mine, atomics::release) == mine) {/%caught"
  "fork-join: leave's exchange acq_rel -> release%coroutine/fork_region.hpp%s/return state_\.exchange\(opener_left, atomics::acq_rel\) == done;/return state_.exchange(opener_left, atomics::release) == done;/%caught"
  "fork-join: finish's exchange acq_rel -> acquire%coroutine/fork_region.hpp%s/if \(state_\.exchange\(done, atomics::acq_rel\) == opener_left\) \{/if (state_.exchange(done, atomics::acquire) == opener_left) {/%caught"
)

# The translation units and flags of each checker (as tests/meson.build
# builds model_check_test and relacy_wake_test).
model_units=(tests/model/model_check_test.cpp tests/model/model_poller_test.cpp tests/model/model_executor_test.cpp
  tests/model/model_task_sync_test.cpp tests/model/model_ring_test.cpp tests/model/model_fork_join_test.cpp
  tests/model/model_checker.cpp tests/test_main.cpp executor/errors.cpp summary_tree/permit_semaphore.cpp
  summary_tree/summary_tree.cpp signal_waker/park_backend.cpp signal_waker/signal_waker.cpp
  signal_waker/sleep_module.cpp executor/host/host_channel.cpp executor/host/notify_descriptor.cpp)
model_flags=(-std=c++20 -O2 -DCANOPY_MODEL_CHECK)
model_libs=(-lboost_context -pthread)
relacy_units=(tests/relacy/wake_protocol_relacy.cpp tests/relacy/offer_deque_relacy.cpp
  tests/relacy/futex_mutex_relacy.cpp tests/relacy/fork_join_relacy.cpp
  tests/test_main.cpp summary_tree/permit_semaphore.cpp summary_tree/summary_tree.cpp
  signal_waker/park_backend.cpp signal_waker/signal_waker.cpp signal_waker/sleep_module.cpp)
relacy_flags=(-std=c++20 -O1 -fno-sized-deallocation -DCANOPY_RELACY)
relacy_libs=()

# $scratch/pristine: the sources as committed (copied once); $scratch/src:
# the tree the real sources' build reads. Each row gets a folder of its own
# ($scratch/rows/KIND-N) with a copy of the sources where its mutant is
# applied, its objects, its checker and its logs, so that rows can run side
# by side.
copy_sources() {
  mkdir -p "$scratch/pristine/tests" "$scratch/rows"
  cp -r summary_tree signal_waker atomics executor task_sync embed fork_join coroutine wait \
    "$scratch/pristine/"
  cp -r tests/model tests/relacy tests/test_main.cpp tests/watchdog.hpp "$scratch/pristine/tests/"
  cp -r "$scratch/pristine" "$scratch/src"
}

# compile_one KIND SOURCES UNIT OBJECT: one translation unit of the tree
# SOURCES, with its dependency list.
compile_one() {
  local kind=$1 sources=$2 unit=$3 object=$4 flags_name
  flags_name="${kind}_flags[@]"
  "$cxx" "${!flags_name}" -I"$sources" -MMD -MF "$object.d" -c "$sources/$unit" \
    -o "$object" 2>"$object.log"
}

# build KIND ROW [FILE]: the checker binary ROW/checker. Without FILE, every
# unit of the real sources is compiled into $scratch/KIND-base; with FILE
# (the file the row's mutant changed in ROW/src), only the units whose
# dependency list names a file of that name are compiled again, into
# ROW/objects, and the rest are linked from the base. Up to COMPILE_JOBS
# compilers at once. Prints nothing; returns non-zero if a compile or the
# link failed (ROW/build.log has the compiler's output).
build() {
  local kind=$1 row=$2 file=${3:-} units_name libs_name unit object pattern pid failed=0
  units_name="${kind}_units[@]"
  libs_name="${kind}_libs[@]"
  local objects=() pids=()
  local base=$scratch/$kind-base mutant=$row/objects sources=$scratch/src
  mkdir -p "$base" "$mutant"
  : >"$row/build.log"
  if [ -n "$file" ]; then
    sources=$row/src
    pattern="/$(basename "$file" | sed 's/[.]/[.]/g')([[:space:]]|\\\\|:|\$)"
  fi
  for unit in "${!units_name}"; do
    object=$base/${unit//\//_}.o
    if [ -n "$file" ] && grep -qE "$pattern" "$object.d"; then
      object=$mutant/${unit//\//_}.o
    elif [ -n "$file" ]; then
      objects+=("$object")
      continue
    fi
    objects+=("$object")
    if [ "${#pids[@]}" -ge "$compile_jobs" ]; then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
    compile_one "$kind" "$sources" "$unit" "$object" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
  if [ -n "$file" ]; then
    cat "$mutant"/*.log >>"$row/build.log" 2>/dev/null || true
  else
    cat "$base"/*.log >>"$row/build.log" 2>/dev/null || true
  fi
  [ "$failed" -eq 0 ] || return 1
  "$cxx" "${objects[@]}" "${!libs_name}" -o "$row/checker" 2>>"$row/build.log"
}

# check KIND ROW [FIRST]: run ROW/checker; passed / failed, or no-first-case
# when FIRST, a --test-case filter, matches no case. A "caught" row needs one
# failure only, so the run stops at the first failed assertion; the cases
# run in name order, which puts the short executor and poller cases before
# the long three-worker one (the verdict does not depend on the order, only
# how soon a mutant fails). With FIRST, those cases run first, alone; if
# they pass, every case runs.
check() {
  local kind=$1 row=$2 first=${3:-}
  if [ -n "$first" ]; then
    if ! timeout 600 "$row/checker" --abort-after=1 --order-by=name --test-case="$first" \
      >"$row/run.log" 2>&1; then
      echo failed
      return
    fi
    if grep -qE '^\[doctest\] test cases: +0 \|' "$row/run.log"; then
      echo no-first-case
      return
    fi
  fi
  if [ "$kind" = relacy ]; then
    CANOPY_RELACY_ITERATIONS=${CANOPY_RELACY_ITERATIONS:-200000} timeout 600 \
      "$row/checker" --abort-after=1 >"$row/run.log" 2>&1 && echo passed || echo failed
  else
    timeout 600 "$row/checker" --abort-after=1 --order-by=name >"$row/run.log" 2>&1 &&
      echo passed || echo failed
  fi
}

status=0
as_expected=0
not_as_expected=0

note_result() {  # note_result OK(true|false)
  if "$1"; then
    as_expected=$((as_expected + 1))
  else
    status=1
    not_as_expected=$((not_as_expected + 1))
  fi
}

# run_row KIND ROW NAME FILE SUBSTITUTION EXPECTED [FIRST]: apply one mutant
# in a copy of the sources, build and check it (FIRST: the cases to run
# first); ROW/report gets the row's lines of the table and ROW/ok true or
# false. An empty FILE is the real sources' row (their base objects are
# built already): expected to pass.
run_row() {
  local kind=$1 row=$2 name=$3 file=$4 substitution=$5 expected=$6 first=${7:-} result verdict
  local ok=true
  if [ -z "$file" ]; then
    result=$(check "$kind" "$row")
    printf '%-62s %-10s %s\n' "$name" "$expected" "$result" >"$row/report"
    if [ "$result" != passed ]; then
      tail -20 "$row/build.log" "$row/run.log" >>"$row/report" 2>/dev/null || true
      ok=false
    fi
    echo "$ok" >"$row/ok"
    return
  fi
  cp -r "$scratch/pristine" "$row/src"
  perl -0pi -e "$substitution" "$row/src/$file" || true
  if cmp -s "$row/src/$file" "$scratch/pristine/$file"; then
    printf '%-62s %-10s %s\n' "$name" "$expected" \
      "DOES NOT APPLY (source changed: update the table)" >"$row/report"
    echo false >"$row/ok"
    return
  fi
  if build "$kind" "$row" "$file"; then
    result=$(check "$kind" "$row" "$first")
  else
    result=build-failed
  fi
  case "$result" in
    failed) verdict="rejected (caught)" ;;
    passed) verdict="passed (not caught)" ;;
    no-first-case) verdict="FIRST CASES MATCH NO CASE (test names changed: update the table)" ;;
    *) verdict=$result ;;
  esac
  if [ "$result" = build-failed ] || [ "$result" = no-first-case ] ||
    { [ "$expected" = caught ] && [ "$result" != failed ]; } ||
    { [ "$expected" = not-needed ] && [ "$result" != passed ]; }; then
    verdict="$verdict  <-- not as the table says"
    ok=false
  fi
  {
    printf '%-62s %-10s %s\n' "$name" "$expected" "$verdict"
    if [ "$result" = failed ]; then
      # The case that failed first (the last header before the first
      # failed assertion) and its failure, without the schedule.
      awk '/^TEST CASE:/ { name = $0 } / ERROR: / && name != "" { print name; exit }' \
        "$row/run.log" | sed -E 's/^TEST CASE: +/      in: /' || true
      grep -a -m1 -E "failure: [a-z]|^(DEADLOCK|LIVELOCK|USER ASSERT FAILED|DATA RACE)" \
        "$row/run.log" |
        sed -E 's/^ *(logged: *)?/      /; s/ schedule: .*//' || true
    elif [ "$result" = build-failed ]; then
      tail -20 "$row/build.log" | sed 's/^/      /' || true
    fi
  } >"$row/report"
  echo "$ok" >"$row/ok"
  rm -rf "$row/src" "$row/objects"
}

# run_table TITLE CHECKER KIND ENTRY...: the real sources, then each mutant
# (each row that --filter keeps), ROW_JOBS rows at a time, the rows' lines
# printed in table order once all have run. Expected: caught (the checker
# must fail), not-needed (it must pass).
run_table() {
  local title=$1 checker=$2 kind=$3
  shift 3
  printf '\n%-62s %-10s %s\n' "$title" "expected" "$checker"
  local base_row=$scratch/rows/$kind-base
  mkdir -p "$base_row"
  compile_jobs=$jobs
  if ! build "$kind" "$base_row"; then
    printf '%-62s %-10s %s\n' "(none: the real sources)" "passes" "build-failed"
    tail -20 "$base_row/build.log" >&2 || true
    note_result false
    return
  fi
  # Rows side by side share the cores: each compiles one unit at a time.
  compile_jobs=$(((jobs + row_jobs - 1) / row_jobs))
  local rows=("$base_row") running=0 entry name file substitution expected first index=0 row
  run_row "$kind" "$base_row" "(none: the real sources)" "" "" passes &
  running=1
  for entry in "$@"; do
    IFS='%' read -r name file substitution expected first <<<"$entry"
    if [ -n "$filter" ] && ! grep -qE -- "$filter" <<<"$name"; then
      continue
    fi
    index=$((index + 1))
    row=$scratch/rows/$kind-$index
    mkdir -p "$row"
    rows+=("$row")
    if [ "$running" -ge "$row_jobs" ]; then
      wait -n || true
      running=$((running - 1))
    fi
    run_row "$kind" "$row" "$name" "$file" "$substitution" "$expected" "$first" &
    running=$((running + 1))
  done
  wait
  for row in "${rows[@]}"; do
    if [ -f "$row/report" ] && [ -f "$row/ok" ]; then
      cat "$row/report"
      note_result "$(cat "$row/ok")"
    else
      echo "-- mutants.sh: a row left no report ($row)"
      note_result false
    fi
  done
}

# A filter must keep at least one row (a typo would otherwise pass).
if [ -n "$filter" ]; then
  kept=0
  rows=("${mutants[@]}")
  if ! "$only_model"; then
    rows+=("${relacy_mutants[@]}")
  fi
  for entry in "${rows[@]}"; do
    if grep -qE -- "$filter" <<<"${entry%%%*}"; then
      kept=$((kept + 1))
    fi
  done
  if [ "$kept" -eq 0 ]; then
    echo "mutants.sh: --filter='$filter' matches no row" >&2
    exit 2
  fi
fi

started=$SECONDS
copy_sources
run_table "mutant" "model check" model "${mutants[@]}"
if "$only_model"; then
  :
elif [ -f /usr/include/relacy/relacy.hpp ]; then
  run_table "memory-order mutant (Relacy)" "relacy_wake_test" relacy "${relacy_mutants[@]}"
else
  echo "relacy-dev is not installed: the memory-order mutants were not run" >&2
  note_result false
fi
echo "($((SECONDS - started)) s)"
echo "mutants: $as_expected as expected, $not_as_expected not"
exit $status
