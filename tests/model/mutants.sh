#!/usr/bin/env bash
# mutants.sh — re-check that the model check can fail: for each safety step
# of the wake protocol, build tests/model_check_test against a copy of the
# sources with that step removed, and report whether the checker rejects it.
#
#   tests/model/mutants.sh            (from the repository root; ./run.sh test --mutants)
#
# The working tree is never modified: each mutant is applied to a copy in a
# scratch folder. A mutant whose pattern no longer matches the source is a
# failure too (the table must follow the code). Mutants marked "weak" would
# weaken an order that only matters on a weaker memory model than the
# sequentially consistent one the checker explores: the checker is
# *expected* to miss them; the Relacy table below covers memory orders.
# The wakes that hand a backlog to a sleeper while the awake workers are busy
# (the JEC wake in new_jobs, the chain wake in work_found) are not needed for
# "no lost wake-up"; the liveness cases (each worker runs a long task after
# its first claim; no execution may end with a task waiting while a worker
# sleeps) are what reject the chain wake. The JEC wake is "not-needed" there:
# with work_found's look after its decrement, a visible task and a sleeper
# always leave an awake idle worker to look again, so the JEC wake only makes
# the wake earlier (docs/correctness.md); the checker must pass without it.
# Exit status: 0 when every "caught" mutant was caught and every mutant
# applied; 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cxx=${CXX:-g++}

# name % file % perl substitution (applied with -0pe) % expected: caught / weak / not-needed
mutants=(
  "try_sleep's final probe (must_stay_awake) removed%signal_waker/sleep_module.cpp%s/if \(permits_\.try_acquire\(\) \|\| probe\.must_stay_awake\(worker\)\) \{/if (permits_.try_acquire()) {/%caught"
  "deactivate_root's re-check of the leaf removed%summary_tree/summary_tree.cpp%s/if \(leaf_words_\[leaf\]\.value\.load\(sync::seq_cst\) != 0\) \{\n    return activate_root\(leaf\);/if (false) {\n    return activate_root(leaf);/%caught"
  "mark_signal_inactive's re-check of the signal word removed%summary_tree/summary_tree.cpp%s/if \(signal_words_\[leaf \* signals_per_leaf_ \+ signal\]\.load\(sync::seq_cst\) != 0\) \{/if (false) {/%caught"
  "stale-bit repair in claim_in_leaf and claim_task_bit removed%summary_tree/summary_tree.cpp%s/if \(\(root_words_\[leaf \/ bits_per_word\]\.value\.load\(sync::relaxed\) & bit_of\(leaf\)\) != 0\) \{/if (false) {/; s/if \(\(leaf_words_\[leaf\]\.value\.load\(sync::relaxed\) & bit_of\(signal\)\) != 0\) \{/if (false) {/%caught"
  "new_jobs never wakes a sleeper (JEC path removed)%signal_waker/sleep_module.cpp%s/return wake_any\(std::min\(jobs - awake_but_idle, sleeping\), wake_reason::jec\);/return 0;/%not-needed"
  "work_found never wakes a sleeper (the chain wake removed)%signal_waker/sleep_module.hpp%s/if \(after\.sleeping\(\) > 0 && after\.awake_but_idle\(\) == 0 && more_work_visible\(\)\) \{/if (false) {/%caught"
  "work_found looks at the tree before it stops counting itself idle%signal_waker/sleep_module.hpp%s/const atomic_counters::counters after = counters_\.sub_inactive\(\);\n    if \(after\.sleeping\(\) > 0 && after\.awake_but_idle\(\) == 0 && more_work_visible\(\)\) \{/const bool seen_before = more_work_visible();\n    const atomic_counters::counters after = counters_.sub_inactive();\n    if (after.sleeping() > 0 && after.awake_but_idle() == 0 && seen_before) {/%caught"
  "host: re-check for work after arming removed%executor/host_channel.hpp%s/if \(has_work\(\)\) \{/if (false) {/%caught"
  "host: push notifies before it publishes the task%executor/host_channel.cpp%s/queued_\.fetch_add\(1, sync::seq_cst\);\n  notify\(\);/notify();\n  queued_.fetch_add(1, sync::seq_cst);/%caught"
  "host: disarm forgets the write of a poster that took the flag%executor/host_channel.cpp%s/if \(!armed_\.exchange\(false, sync::seq_cst\)\) \{\n    \+\+expected_writes_;/if (!armed_.exchange(false, sync::seq_cst)) {\n/%caught"
  "host: notify writes without taking the armed flag%executor/host_channel.cpp%s/if \(armed_\.load\(sync::seq_cst\) && armed_\.exchange\(false, sync::seq_cst\)\) \{/if (armed_.load(sync::seq_cst)) {/%caught"
  "poller: wakers never claim a sleeper parked in the driver%signal_waker/sleep_module.cpp%s/if \(pass == 0 && waker\.parks_on_other_backend\(\)\) \{/if (waker.parks_on_other_backend()) {/%caught"
  "poller: a parking worker never takes the poller token%signal_waker/sleep_module.cpp%s/const bool polling = poller_backend_ != nullptr && try_take_poller\(\);/const bool polling = false;/%caught"
  "poller: a self-claiming poller skips the sleeper bookkeeping%signal_waker/sleep_module.cpp%s/if \(self_claimed\) \{\n    forget_sleeper\(\);/if (false) {\n    forget_sleeper();/%caught"
  "poller: an aborted park keeps the poller token%signal_waker/sleep_module.cpp%s/(latch\.abort_sleep\(\)\) \{\n      forget_sleeper\(\);\n    \}[^\n]*\n    latch\.reset\(\);\n)    if \(polling\) \{\n      release_poller\(\);\n    \}\n/\$1/%caught"
  "LIFO: a thief's steal loads and stores instead of the exchange%executor/lifo_slot.hpp%s/(steal\(\) noexcept \{[\s\S]*?)return word_\.exchange\(empty, sync::acquire\);/\$1const std::uint32_t seen = word_.load(sync::relaxed);\n    word_.store(empty, sync::relaxed);\n    return seen;/%caught"
  "LIFO: put stores over the slot (the evicted task is never returned)%executor/lifo_slot.hpp%s/return word_\.exchange\(slot, sync::acq_rel\);/word_.store(slot, sync::release);\n    return empty;/%caught"
  "run-at-join: take_if_is loads and stores instead of the CAS%executor/lifo_slot.hpp%s/word_\.compare_exchange_strong\(expected, empty, sync::acquire, sync::relaxed\)/(static_cast<void>(expected), word_.store(empty, sync::relaxed), true)/%caught"
  "run-at-join: no re-read of the state after a tree claim%executor/pending_claim.hpp%s/if \(task_slot::generation_of\(state\.load\(sync::relaxed\)\) != id\.generation\) \{\n    return pending_claim::took_next_task;/if (false) {\n    return pending_claim::took_next_task;/%caught"
  "run-at-join: claim_pending skips the generation and state check%executor/pending_claim.hpp%s/if \(task_slot::generation_of\(seen\) != id\.generation \|\|\n      \(seen & task_slot::flag_mask\) != task_slot::scheduled\) \{/if (false) {/%caught"
  "drain: the second pass of the quiescence check removed%executor/drain_check.hpp%s/if \(sleep\.waker\(index\)\.latch\(\)\.word\(\)\.load\(sync::seq_cst\) != sleep_latch::sleeping \|\|\n        sleep\.park_epoch\(index\) != epochs\[index\]\) \{/if (false) {/%caught"
)

# The same idea under Relacy's weak-memory simulation
# (tests/relacy/wake_protocol_relacy.cpp, CANOPY_RELACY): memory orders.
# "caught": Relacy must report the lost wake-up. The protocol has no fences
# since the three in sleep_module were shown not needed (docs/correctness.md,
# "Memory orders"); the argument rests on seq_cst RMWs and seq_cst loads, and
# weakening the two the lost-wakeup argument names is rejected.
relacy_mutants=(
  "activate_root's root RMW (fetch_or) seq_cst -> acq_rel%summary_tree/summary_tree.cpp%s/root_words_\[leaf \/ bits_per_word\]\.value\.fetch_or\(mask, sync::seq_cst\)/root_words_[leaf \/ bits_per_word].value.fetch_or(mask, sync::acq_rel)/%caught"
  "the final probe's root load (any_active) seq_cst -> acquire%summary_tree/summary_tree.cpp%s/if \(root_words_\[index\]\.value\.load\(sync::seq_cst\) != 0\)/if (root_words_[index].value.load(sync::acquire) != 0)/%caught"
  "offer_deque: pop's exchange on bottom -> relaxed store%executor/offer_deque.hpp%s/static_cast<void>\(bottom_\.exchange\(bottom, sync::seq_cst\)\);/bottom_.store(bottom, sync::relaxed);/%caught"
  "offer_deque: pop's load of top seq_cst -> acquire%executor/offer_deque.hpp%s/std::int64_t top = top_\.load\(sync::seq_cst\);\n    if \(top > bottom\)/std::int64_t top = top_.load(sync::acquire);\n    if (top > bottom)/%caught"
  "offer_deque: push publishes bottom relaxed, not release%executor/offer_deque.hpp%s/bottom_\.store\(bottom \+ 1, sync::release\);/bottom_.store(bottom + 1, sync::relaxed);/%caught"
)

copy_sources() {
  rm -rf "$scratch/src"
  mkdir -p "$scratch/src/tests"
  cp -r summary_tree signal_waker sync executor "$scratch/src/"
  cp -r tests/model tests/relacy tests/model_check_test.cpp tests/model_poller_test.cpp \
    tests/model_executor_test.cpp tests/test_main.cpp tests/watchdog.hpp "$scratch/src/tests/"
}

build_and_run() {
  local dir=$scratch/src
  if ! "$cxx" -std=c++20 -O2 -DCANOPY_MODEL_CHECK -I"$dir" \
    "$dir/tests/model_check_test.cpp" "$dir/tests/model_poller_test.cpp" \
    "$dir/tests/model_executor_test.cpp" "$dir/tests/model/model_checker.cpp" \
    "$dir/tests/test_main.cpp" "$dir/summary_tree/permit_semaphore.cpp" \
    "$dir/summary_tree/summary_tree.cpp" "$dir/signal_waker/park_backend.cpp" \
    "$dir/signal_waker/signal_waker.cpp" "$dir/signal_waker/sleep_module.cpp" \
    "$dir/executor/host_channel.cpp" "$dir/executor/notify_descriptor.cpp" \
    -lboost_context -pthread -o "$scratch/model_check" 2>"$scratch/build.log"; then
    echo "build-failed"
    return
  fi
  if timeout 600 "$scratch/model_check" >"$scratch/run.log" 2>&1; then
    echo "passed"
  else
    echo "failed"
  fi
}

build_and_run_relacy() {
  local dir=$scratch/src
  if ! "$cxx" -std=c++20 -O1 -fno-sized-deallocation -DCANOPY_RELACY -I"$dir" \
    "$dir/tests/relacy/wake_protocol_relacy.cpp" "$dir/tests/relacy/offer_deque_relacy.cpp" \
    "$dir/tests/test_main.cpp" \
    "$dir/summary_tree/permit_semaphore.cpp" "$dir/summary_tree/summary_tree.cpp" \
    "$dir/signal_waker/park_backend.cpp" "$dir/signal_waker/signal_waker.cpp" \
    "$dir/signal_waker/sleep_module.cpp" -o "$scratch/relacy" 2>"$scratch/build.log"; then
    echo "build-failed"
    return
  fi
  if CANOPY_RELACY_ITERATIONS=${CANOPY_RELACY_ITERATIONS:-200000} timeout 600 \
    "$scratch/relacy" >"$scratch/run.log" 2>&1; then
    echo "passed"
  else
    echo "failed"
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

# run_table TITLE CHECKER BUILDER ENTRY...: the real sources, then each mutant.
# Expected: caught (the checker must fail), not-needed (it must pass), weak
# (the model check is expected to pass: see above).
run_table() {
  local title=$1 checker=$2 builder=$3
  shift 3
  printf '\n%-62s %-10s %s\n' "$title" "expected" "$checker"
  copy_sources
  local baseline
  baseline=$("$builder")
  printf '%-62s %-10s %s\n' "(none: the real sources)" "passes" "$baseline"
  if [ "$baseline" != passed ]; then
    tail -20 "$scratch/build.log" "$scratch/run.log" >&2 || true
    note_result false
  else
    note_result true
  fi
  local entry name file substitution expected before result verdict ok
  for entry in "$@"; do
    IFS='%' read -r name file substitution expected <<<"$entry"
    copy_sources
    before=$(md5sum "$scratch/src/$file")
    perl -0pi -e "$substitution" "$scratch/src/$file" || true
    if [ "$(md5sum "$scratch/src/$file")" = "$before" ]; then
      printf '%-62s %-10s %s\n' "$name" "$expected" "DOES NOT APPLY (source changed: update the table)"
      note_result false
      continue
    fi
    result=$("$builder")
    case "$result" in
      failed) verdict="rejected (caught)" ;;
      passed) verdict="passed (not caught)" ;;
      *) verdict=$result ;;
    esac
    ok=true
    if [ "$result" = build-failed ] || { [ "$expected" = caught ] && [ "$result" != failed ]; } ||
      { [ "$expected" = not-needed ] && [ "$result" != passed ]; }; then
      verdict="$verdict  <-- not as the table says"
      ok=false
    fi
    note_result "$ok"
    printf '%-62s %-10s %s\n' "$name" "$expected" "$verdict"
    if [ "$result" = failed ]; then
      grep -m1 -E "failure: [a-z]|DEADLOCK" "$scratch/run.log" | sed 's/^/      /' || true
    fi
  done
}

run_table "mutant" "model check" build_and_run "${mutants[@]}"
if [ -f /usr/include/relacy/relacy.hpp ]; then
  run_table "memory-order mutant (Relacy)" "relacy_wake_test" build_and_run_relacy \
    "${relacy_mutants[@]}"
else
  echo "relacy-dev is not installed: the memory-order mutants were not run" >&2
  note_result false
fi
echo "mutants: $as_expected as expected, $not_as_expected not"
exit $status
