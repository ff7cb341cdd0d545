// Model checking of the task_sync wait/notify handshakes (task_sync/
// channel_core.hpp, semaphore_core.hpp, wait_lock.hpp compiled with
// CANOPY_MODEL_CHECK): the real protocol code, instantiated with a waker
// that unparks a logical thread, under every interleaving within the
// preemption bound. A logical thread waits as canopy's wait sources do: it
// tries without waiting, then arms (which re-checks under the lock), then
// parks until its node's state leaves `waiting`. A lost wake-up shows as an
// execution that ends with a thread parked; tests/model/mutants.sh removes
// each re-check to show that the cases notice. The same file checks
// atomics::futex_mutex (atomics/futex_mutex.hpp), the reactor's and the timer
// queue's lock: mutual exclusion, and no locker left asleep.
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atomics/atomics.hpp"
#include "atomics/futex.hpp"
#include "atomics/futex_mutex.hpp"
#include "task_sync/channel_core.hpp"
#include "task_sync/semaphore_core.hpp"
#include "tests/model/expect_clean.hpp"
#include "tests/model/explored_bound.hpp"
#include "tests/model/model_checker.hpp"

namespace {

using canopy::detail::channel_op;
using canopy::detail::waiter_waiting;

// Wakes the logical thread parked on a node's state word.
struct model_waker {
  canopy::detail::atomics::atomic<std::uint32_t>* word = nullptr;
  void wake() const noexcept {
    if (word != nullptr) {
      canopy::detail::atomics::futex_wake_all(*word);
    }
  }
};

struct waits {
  bool stop = false;  // set by teardown only
  std::vector<canopy::detail::atomics::atomic<std::uint32_t>*> words;

  // Park until the node is finished (or teardown); false if torn down.
  bool park(canopy::detail::atomics::atomic<std::uint32_t>& state) {
    words.push_back(&state);
    while (state.load(canopy::detail::atomics::acquire) == waiter_waiting) {
      if (stop) {
        return false;
      }
      canopy::detail::atomics::futex_wait(state, waiter_waiting);
    }
    return true;
  }
  void teardown() {
    stop = true;
    for (auto* word : words) {
      canopy::detail::atomics::futex_wake_all(*word);
    }
  }
};

using model_channel = canopy::detail::basic_channel<int, model_waker>;

struct channel_world {
  explicit channel_world(std::size_t capacity) : channel(capacity) {}
  model_channel channel;
  waits parking;
  std::vector<int> received;  // the receiver thread's only
  int sent = 0;               // the sender thread's only

  // As detail::send_op: try, then arm, then park.
  void send(int value) {
    if (channel.try_send(value) == channel_op::ok) {
      ++sent;
      return;
    }
    model_channel::send_waiter node;
    node.value = &value;
    if (channel.arm_send(node, model_waker{&node.state})) {
      const bool finished = parking.park(node.state);
      channel.disarm(node, true);
      if (!finished) {
        return;
      }
    }
    if (node.state.load(canopy::detail::atomics::acquire) == canopy::detail::waiter_done) {
      ++sent;
    }
  }

  // As detail::recv_op.
  void recv() {
    std::optional<int> value;
    const channel_op seen = channel.try_recv(value);
    if (seen == channel_op::ok) {
      received.push_back(*value);
      return;
    }
    if (seen == channel_op::closed) {
      return;
    }
    model_channel::recv_waiter node;
    if (channel.arm_recv(node, model_waker{&node.state})) {
      const bool finished = parking.park(node.state);
      channel.disarm(node, false);
      if (!finished) {
        return;
      }
    }
    if (node.state.load(canopy::detail::atomics::acquire) == canopy::detail::waiter_done) {
      channel.take_promised(value);
      received.push_back(*value);
    }
  }

  std::string check(const std::vector<bool>& parked, int values) const {
    for (bool one : parked) {
      if (one) {
        return "a thread is still parked: lost wake-up";
      }
    }
    if (sent != values || static_cast<int>(received.size()) != values) {
      return "sent " + std::to_string(sent) + ", received " + std::to_string(received.size());
    }
    for (int i = 0; i < values; ++i) {
      if (received[i] != i + 1) {
        return "values out of order";
      }
    }
    return "";
  }
};

canopy::detail::model::exploration_result check_channel(std::size_t capacity, int values,
                                                        int bound) {
  std::shared_ptr<channel_world> current;
  return canopy::detail::model::explore(
      [&] {
        current = std::make_shared<channel_world>(capacity);
        canopy::detail::model::scenario run;
        run.threads.emplace_back([world = current, values] {
          for (int i = 1; i <= values; ++i) {
            world->send(i);
          }
        });
        run.threads.emplace_back([world = current, values] {
          for (int i = 0; i < values; ++i) {
            world->recv();
          }
        });
        run.check = [world = current, values](const std::vector<bool>& parked) {
          return world->check(parked, values);
        };
        run.teardown = [world = current] { world->parking.teardown(); };
        return run;
      },
      canopy::detail::model::explored_bound(bound, 2), 400000);
}

using model_semaphore = canopy::detail::basic_semaphore<model_waker>;

struct semaphore_world {
  model_semaphore semaphore{1, 1};
  waits parking;
  int inside = 0;  // plain: two holders at once would be the bug
  int overlaps = 0;
  int done = 0;

  void acquire_release() {
    if (!semaphore.try_acquire(1)) {
      model_semaphore::waiter node;
      node.needed = 1;
      if (semaphore.arm(node, model_waker{&node.state})) {
        const bool finished = parking.park(node.state);
        semaphore.disarm(node);
        if (!finished) {
          return;
        }
      }
    }
    canopy::detail::model::note_access(&inside, canopy::detail::model::access_kind::write);
    overlaps += inside++ != 0 ? 1 : 0;
    --inside;
    ++done;
    semaphore.release(1);
  }
};

canopy::detail::model::exploration_result check_semaphore(int threads, int bound) {
  std::shared_ptr<semaphore_world> current;
  return canopy::detail::model::explore(
      [&] {
        current = std::make_shared<semaphore_world>();
        canopy::detail::model::scenario run;
        for (int i = 0; i < threads; ++i) {
          run.threads.emplace_back([world = current] { world->acquire_release(); });
        }
        run.check = [world = current, threads](const std::vector<bool>& parked) -> std::string {
          for (bool one : parked) {
            if (one) {
              return "a thread is still parked: lost wake-up";
            }
          }
          if (world->overlaps != 0) {
            return "two holders of a one-permit semaphore";
          }
          if (world->done != threads || world->semaphore.available() != 1) {
            return "a permit was lost";
          }
          return "";
        };
        run.teardown = [world = current] { world->parking.teardown(); };
        return run;
      },
      canopy::detail::model::explored_bound(bound, threads), 400000);
}

struct mutex_world {
  canopy::detail::atomics::futex_mutex mutex;
  int inside = 0;  // plain: two holders at once would be the bug
  int overlaps = 0;
  int done = 0;

  void lock_unlock(int rounds) {
    for (int round = 0; round < rounds; ++round) {
      mutex.lock();
      canopy::detail::model::note_access(&inside, canopy::detail::model::access_kind::write);
      overlaps += inside++ != 0 ? 1 : 0;
      canopy::detail::model::schedule_point();  // another thread may run while we hold it
      --inside;
      ++done;
      mutex.unlock();
    }
  }
};

// A locker parks only on the mutex's word, and only while another thread
// holds it; a holder never parks, so an execution that ends with a thread
// parked lost a wake-up. No teardown: once the checker stops switching,
// a parked locker's exchange finds the word free (the holder has finished).
canopy::detail::model::exploration_result check_futex_mutex(int threads, int rounds, int bound) {
  std::shared_ptr<mutex_world> current;
  return canopy::detail::model::explore(
      [&] {
        current = std::make_shared<mutex_world>();
        canopy::detail::model::scenario run;
        for (int i = 0; i < threads; ++i) {
          run.threads.emplace_back([world = current, rounds] { world->lock_unlock(rounds); });
        }
        run.check = [world = current, threads,
                     rounds](const std::vector<bool>& parked) -> std::string {
          for (bool one : parked) {
            if (one) {
              return "a locker is still parked: lost wake-up";
            }
          }
          if (world->overlaps != 0) {
            return "two holders of the mutex at once";
          }
          if (world->done != threads * rounds) {
            return "a locker did not finish";
          }
          // The word is free again: a new locker takes it without waiting.
          if (!world->mutex.try_lock()) {
            return "the mutex is still taken after every holder left";
          }
          world->mutex.unlock();
          return "";
        };
        return run;
      },
      canopy::detail::model::explored_bound(bound, threads), 400000);
}

}  // namespace

TEST_CASE("model sync: futex_mutex excludes and wakes every sleeper (2 and 3 lockers)") {
  // Two lockers at five preemptions: a spinning locker that sees the word
  // free and a holder that takes it again before the spinner's CAS need
  // five switches away from a thread that could go on.
  canopy::detail::model::expect_clean(check_futex_mutex(2, 3, 5));
  canopy::detail::model::expect_clean(check_futex_mutex(3, 2, 4));
}

TEST_CASE("model task_sync: a sender and a receiver that race lose no wake-up (capacity 1)") {
  canopy::detail::model::expect_clean(check_channel(1, 3, 3));
}

TEST_CASE("model task_sync: sender and receiver through a two-slot ring") {
  canopy::detail::model::expect_clean(check_channel(2, 3, 2));
}

TEST_CASE("model task_sync: semaphore release races a waiter's arm; no lost permit or wake-up") {
  // ThreadSanitizer builds explore one preemption (explored_bound): two
  // threads then have only 10 schedules, too few to check anything, so
  // there the first check runs three.
  canopy::detail::model::expect_clean(
      check_semaphore(canopy::detail::model::under_thread_sanitizer ? 3 : 2, 3));
  canopy::detail::model::expect_clean(check_semaphore(3, 2));
}
