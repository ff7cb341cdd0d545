// store.hpp — the kv_server's data: a map sharded by key hash, each shard
// behind its own canopy::mutex, with per-key expiry.
//
// Expiry: EXPIRE stamps the entry with a deadline and a fresh generation
// and hands (key, generation, deadline) to the expiry task, which starts a
// sleeping child per request (a task_group's spawn_detached: nothing of a
// finished timer stays behind). The timer, once it wakes, removes the key
// only if the entry still has that generation: a SET, a DEL or a later
// EXPIRE in between made it stale. Reads also treat an entry past its
// deadline as gone, so a late timer is never visible. Expiries are not
// written to the log (it records what clients were told succeeded).
#pragma once

#include <atomic>
#include <canopy/channel.hpp>
#include <canopy/io.hpp>
#include <canopy/sync.hpp>
#include <canopy/task.hpp>
#include <canopy/task_group.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "log_writer.hpp"

namespace kv {

using clock = std::chrono::steady_clock;

class store {
 public:
  explicit store(log_writer& log, std::size_t shard_count = 16) : log_(&log) {
    shards_.reserve(shard_count);
    for (std::size_t i = 0; i < shard_count; ++i) {
      shards_.push_back(std::make_unique<shard>());
    }
  }

  canopy::task<std::optional<std::string>> get(const std::string& key) {
    shard& home = shard_of(key);
    const canopy::mutex::guard held = co_await home.lock.lock();
    entry* found = home.live(key, clock::now());
    if (found == nullptr) {
      co_return std::nullopt;
    }
    co_return found->value;
  }

  // Sets the value and clears any expiry; the receipt says when the log
  // has it.
  canopy::task<log_writer::receipt> set(const std::string& key, std::string value) {
    shard& home = shard_of(key);
    const canopy::mutex::guard held = co_await home.lock.lock();
    std::string record = "SET " + key + " " + value;
    entry& slot = home.map[key];
    slot.value = std::move(value);
    slot.expires.reset();
    slot.generation = ++home.generations;
    log_writer::receipt logged = co_await log_->submit(std::move(record));
    co_return logged;
  }

  // std::nullopt: there was no such key (nothing logged).
  canopy::task<std::optional<log_writer::receipt>> del(const std::string& key) {
    shard& home = shard_of(key);
    const canopy::mutex::guard held = co_await home.lock.lock();
    if (home.live(key, clock::now()) == nullptr) {
      co_return std::nullopt;
    }
    home.map.erase(key);
    log_writer::receipt logged = co_await log_->submit("DEL " + key);
    co_return logged;
  }

  // False: no such key.
  canopy::task<bool> expire(const std::string& key, std::chrono::seconds after) {
    shard& home = shard_of(key);
    timer_request request{key, 0, clock::now() + after};
    {
      const canopy::mutex::guard held = co_await home.lock.lock();
      entry* found = home.live(key, clock::now());
      if (found == nullptr) {
        co_return false;
      }
      found->expires = request.deadline;
      found->generation = request.generation = ++home.generations;
    }
    // After close_expiry() (shutting down) the request is dropped: the
    // process ends before it would fire, and reads check the deadline.
    (void)co_await timers_.send(std::move(request));
    co_return true;
  }

  // Seconds left (rounded up); -1: no expiry; -2: no such key.
  canopy::task<long long> ttl(const std::string& key) {
    shard& home = shard_of(key);
    const canopy::mutex::guard held = co_await home.lock.lock();
    const clock::time_point now = clock::now();
    entry* found = home.live(key, now);
    if (found == nullptr) {
      co_return -2;
    }
    if (!found->expires) {
      co_return -1;
    }
    const auto left = std::chrono::ceil<std::chrono::seconds>(*found->expires - now);
    co_return static_cast<long long>(left.count());
  }

  // Live keys, counted shard by shard under each shard's lock.
  canopy::task<std::size_t> size() {
    std::size_t total = 0;
    const clock::time_point now = clock::now();
    for (const std::unique_ptr<shard>& each : shards_) {
      const canopy::mutex::guard held = co_await each->lock.lock();
      for (const auto& [key, value] : each->map) {
        total += value.expires && *value.expires <= now ? 0 : 1;
      }
    }
    co_return total;
  }

  // The expiry task: one sleeping child per EXPIRE, until close_expiry();
  // then the timers still sleeping are cancelled.
  canopy::task<void> run_expiry() {
    canopy::task_group<void> sleeping;
    while (std::optional<timer_request> next = co_await timers_.recv()) {
      sleeping.spawn_detached(expire_at(std::move(*next)));
    }
    co_await sleeping.close();
  }
  void close_expiry() { timers_.close(); }

 private:
  struct entry {
    std::string value;
    std::optional<clock::time_point> expires;
    std::uint64_t generation = 0;
  };
  struct shard {
    canopy::mutex lock;
    std::unordered_map<std::string, entry> map;  // under lock
    std::uint64_t generations = 0;               // under lock

    // The entry, or nullptr if absent or past its deadline (then erased).
    entry* live(const std::string& key, clock::time_point now) {
      auto found = map.find(key);
      if (found == map.end()) {
        return nullptr;
      }
      if (found->second.expires && *found->second.expires <= now) {
        map.erase(found);
        return nullptr;
      }
      return &found->second;
    }
  };
  struct timer_request {
    std::string key;
    std::uint64_t generation;
    clock::time_point deadline;
  };

  shard& shard_of(const std::string& key) {
    return *shards_[std::hash<std::string>{}(key) % shards_.size()];
  }

  canopy::task<void> expire_at(timer_request request) {
    co_await canopy::sleep_until(request.deadline);
    shard& home = shard_of(request.key);
    const canopy::mutex::guard held = co_await home.lock.lock();
    auto found = home.map.find(request.key);
    if (found != home.map.end() && found->second.generation == request.generation) {
      home.map.erase(found);
    }
  }

  log_writer* log_;
  std::vector<std::unique_ptr<shard>> shards_;
  canopy::channel<timer_request> timers_{1024};
};

}  // namespace kv
