// log_writer.hpp — the kv_server's append-only log: "SET key value" and
// "DEL key" lines, one per successful write, in the order the writes took
// effect on each key.
//
// Writers hand a record to submit() (through a bounded canopy::channel) and
// get a receipt; one writer task takes the records in batches and appends
// each batch with write(2) on a canopy::run_blocking thread (with --fsync,
// followed by fdatasync), then completes every receipt of the batch. The
// server acknowledges a write only once its receipt says the record was
// written, so an acknowledged write is in the file (in the kernel's page
// cache: it survives the process being killed; with --fsync it is on disk)
// before the client hears +OK. Closing the channel at shutdown lets the
// writer append what is still queued, then end.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <canopy/blocking.hpp>
#include <canopy/channel.hpp>
#include <canopy/task.hpp>
#include <cerrno>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace kv {

class log_writer {
 public:
  // A receipt of a submitted record; empty when the server runs without a
  // log (then a write is acknowledged at once).
  struct receipt {
    std::optional<canopy::oneshot_receiver<bool>> written;

    // True once the record is in the file; false if the append failed (or
    // the writer went away without writing it).
    canopy::task<bool> wait() {
      if (!written) {
        co_return true;
      }
      const std::optional<bool> outcome = co_await written->recv();
      co_return outcome.value_or(false);
    }
  };

  // path empty: no log. Throws std::system_error if the file cannot be
  // opened for appending.
  log_writer(const std::string& path, bool sync) : sync_(sync) {
    if (!path.empty()) {
      fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd_ < 0) {
        throw std::system_error(errno, std::system_category(), "kv_server: cannot open " + path);
      }
    }
  }
  log_writer(const log_writer&) = delete;
  log_writer& operator=(const log_writer&) = delete;
  ~log_writer() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }

  // Queues `line` (without "\n"); waits while the queue is full. Call it
  // while holding the lock of the key's shard, so the log's order of a
  // key's writes is the order they took effect.
  canopy::task<receipt> submit(std::string line) {
    if (fd_ < 0) {
      co_return receipt{};
    }
    line += '\n';
    // Named ends and a named record, no structured binding or temporary
    // inside the co_await: GCC 12 mis-destroys those across a suspension.
    canopy::oneshot_pair<bool> ends = canopy::oneshot<bool>();
    record queued{std::move(line), std::move(ends.sender)};
    // Closed (cannot happen while connections run, see main.cpp): the
    // record comes back and its sender goes with it, so the wait says false.
    (void)co_await records_.send(std::move(queued));
    receipt result;
    result.written.emplace(std::move(ends.receiver));
    co_return result;
  }

  // The writer task: run it once; it ends after close() once the queue is
  // empty.
  canopy::task<void> run() {
    std::vector<record> batch;
    while (std::optional<record> first = co_await records_.recv()) {
      batch.clear();
      batch.push_back(std::move(*first));
      std::string text = batch.back().line;
      while (batch.size() < max_batch) {
        canopy::recv_result<record> more = records_.try_recv();
        if (!more) {
          break;
        }
        text += (*more).line;
        batch.push_back(std::move(*more));
      }
      // Named, then moved in: GCC 12 destroys twice the captures of a
      // lambda temporary written inside a co_await expression.
      auto append = [fd = fd_, sync = sync_, bytes = std::move(text)] {
        std::size_t done = 0;
        while (done < bytes.size()) {
          const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
          if (wrote < 0 && errno != EINTR) {
            return false;
          }
          done += wrote > 0 ? static_cast<std::size_t>(wrote) : 0;
        }
        return !sync || ::fdatasync(fd) == 0;
      };
      const bool ok = co_await canopy::run_blocking(std::move(append));
      if (ok) {
        written_.fetch_add(batch.size(), std::memory_order_relaxed);
      }
      for (record& each : batch) {
        (void)each.done.send(ok);  // a receiver gone (its connection cancelled) is fine
      }
    }
  }

  // No more records: the writer appends what is queued and ends.
  void close() { records_.close(); }

  [[nodiscard]] std::size_t written() const noexcept {
    return written_.load(std::memory_order_relaxed);
  }

 private:
  struct record {
    std::string line;
    canopy::oneshot_sender<bool> done;
  };
  static constexpr std::size_t max_batch = 512;

  int fd_ = -1;
  bool sync_ = false;
  canopy::channel<record> records_{4096};
  std::atomic<std::size_t> written_{0};
};

}  // namespace kv
