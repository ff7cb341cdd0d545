// chat_server.hpp — a line-based chat room on Canopy's toolkit, as a small
// library: examples/chat_server.cpp is its command line, and
// tests/examples/chat_server_test.cpp drives it in-process. Public headers only.
//
//   chat::server room(chat::options{.port = 7000, .unix_path = "/tmp/chat.sock"});
//   chat::report what = room.wait();   // until SIGINT/SIGTERM or options.max_run
//
// The protocol. A client's first line is its name (1..32 bytes, no spaces);
// it gets "* welcome NAME" and from then on every line it sends goes to
// every other client as "NAME: TEXT". Lines starting with "* " are the
// server's notices (joins, leaves, errors, shutdown). A line ends at "\n"
// (a "\r" before it is dropped); a last line the client sends without one
// before it hangs up counts too. A line longer than options.max_line, or a
// bad name, gets "* error: ..." and the connection is closed.
//
// How it uses the toolkit:
//   * a canopy::io::buffered_reader per client for its lines (read_line,
//     whose errc::message_size is the "line too long"), and
//     canopy::io::write_all for the text it sends;
//   * canopy::io::resolve for the TCP bind address (options.host);
//   * a tcp_listener and a unix_listener (options.unix_path), each with an
//     accept loop that hands connections to the server's task through a
//     canopy::channel; the server task spawns a client task per connection
//     into a canopy::task_group;
//   * per client, a bounded canopy::channel<std::string> of outgoing lines
//     (options.outbox_lines) drained by its own writer task. A broadcast
//     only try_send()s: a client whose channel is full (it does not read)
//     is dropped, and nobody else waits for it;
//   * the member list behind a canopy::mutex (the broadcast holds it, so
//     every client sees the lines in one order, and each sender's in the
//     order sent);
//   * canopy::race with canopy::stopped for every read and write of a
//     client: they end when the client is dropped (its own std::stop_source)
//     or when the drain deadline passes (the server's), so no task ever
//     shuts down another task's socket;
//   * canopy::run_blocking for the transcript (options.transcript): each
//     line is appended to a file with write(2), off the workers;
//   * canopy::io::signal_set{SIGINT, SIGTERM} for the graceful shutdown:
//     stop accepting, send every client "* server shutting down" and close
//     its channel (its writer flushes what is queued, then shuts the
//     socket's write side), let the clients hang up within
//     options.drain_deadline (the client group's all_ended() under
//     canopy::with_timeout), then stop the rest.
// Signals: the constructor blocks SIGINT and SIGTERM in the calling thread
// before it creates its executor, so construct the server before any other
// thread exists (io/signal.hpp's rule), or block them yourself first.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <canopy/blocking.hpp>
#include <canopy/channel.hpp>
#include <canopy/io.hpp>
#include <canopy/io/buffered.hpp>
#include <canopy/race.hpp>
#include <canopy/sync.hpp>
#include <canopy/task_group.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

namespace chat {

using namespace std::chrono_literals;

struct options {
  std::string host = "127.0.0.1";           // resolved with canopy::io::resolve
  std::uint16_t port = 0;                   // 0: a free port (see server::tcp_endpoint)
  std::string unix_path;                    // empty: no Unix-domain listener
  std::string transcript;                   // empty: no transcript file
  std::chrono::milliseconds max_run = 60s;  // stops by itself after this
  std::chrono::milliseconds drain_deadline = 2s;
  std::size_t outbox_lines = 256;  // per client; full: the client is dropped
  std::size_t max_line = 4096;
  int send_buffer = 64 * 1024;  // SO_SNDBUF per client: bounds what a slow client holds
  std::size_t workers = 2;
};

struct report {
  int signal = 0;                           // the signal that stopped the server; 0: max_run did
  std::size_t clients = 0;                  // connections accepted
  std::size_t lines = 0;                    // lines broadcast
  std::size_t dropped = 0;                  // clients dropped because their channel was full
  std::size_t rejected = 0;                 // bad name or line too long
  std::size_t forced = 0;                   // connections still open at the drain deadline
  std::chrono::milliseconds drain_time{0};  // from the stop to the last client gone
};

namespace detail {

// One connection. The room holds it from accept to the end of its task; its
// socket is closed when the last holder lets go, after it left the room.
struct member {
  explicit member(std::size_t outbox_lines) : outbox(outbox_lines) {}
  virtual ~member() = default;
  member(const member&) = delete;
  member& operator=(const member&) = delete;
  // Drops the client: its reader's and writer's waits end (they race
  // `dropped`), and the client task ends. Any thread.
  void kick() noexcept { dropped.request_stop(); }

  std::string name;
  canopy::channel<std::string> outbox;
  std::stop_source dropped;
  bool joined = false;  // under the room's mutex
};

template <class Stream>
struct stream_member final : member {
  stream_member(Stream connection, std::size_t outbox_lines)
      : member(outbox_lines), stream(std::move(connection)) {}
  Stream stream;
};

// Whether a race of an operation against the client's two stops (`dropped`
// and the server's drain deadline) was won by the operation.
template <class Race>
bool operation_won(const Race& got) {
  return got.template has_value<0>();
}

// Counters: written by client tasks, read by server::wait() after the
// server task ended (its join orders them).
struct counters {
  std::atomic<std::size_t> clients{0}, lines{0}, dropped{0}, rejected{0}, forced{0};
};

class room {
 public:
  explicit room(counters& stats) : stats_(&stats) {}

  canopy::task<void> enter(std::shared_ptr<member> who) {
    const canopy::mutex::guard held = co_await lock_.lock();
    live_.push_back(std::move(who));
  }
  canopy::task<void> forget(const member* who) {
    const canopy::mutex::guard held = co_await lock_.lock();
    std::erase_if(live_, [who](const std::shared_ptr<member>& each) { return each.get() == who; });
  }
  // False once the server is shutting down.
  canopy::task<bool> join(member& who) {
    const canopy::mutex::guard held = co_await lock_.lock();
    if (closing_) {
      co_return false;
    }
    (void)who.outbox.try_send("* welcome " + who.name + "\n");
    who.joined = true;
    deliver_locked(who, "* " + who.name + " joined\n");
    co_return true;
  }
  canopy::task<void> leave(member& who) {
    const canopy::mutex::guard held = co_await lock_.lock();
    if (who.joined) {
      who.joined = false;
      if (!closing_) {  // after shut() the channels are closed
        deliver_locked(who, "* " + who.name + " left\n");
      }
    }
    who.outbox.close();
  }
  canopy::task<void> say(member& from, std::string line) {
    const canopy::mutex::guard held = co_await lock_.lock();
    if (from.joined) {
      stats_->lines.fetch_add(1, std::memory_order_relaxed);
      deliver_locked(from, line);
    }
  }
  // Graceful shutdown: no more joins; every client gets `notice`, then the
  // end of its channel.
  canopy::task<void> shut(std::string notice) {
    const canopy::mutex::guard held = co_await lock_.lock();
    closing_ = true;
    for (const std::shared_ptr<member>& each : live_) {
      if (each->joined) {
        (void)each->outbox.try_send(notice);  // full: it is closed at the deadline anyway
      }
      each->outbox.close();
    }
  }
 private:
  // To every joined member but `from`, without waiting: a full channel
  // means a client that does not keep up, and it is dropped.
  void deliver_locked(member& from, const std::string& line) {
    for (const std::shared_ptr<member>& each : live_) {
      if (each.get() == &from || !each->joined) {
        continue;
      }
      canopy::send_result<std::string> sent = each->outbox.try_send(line);
      if (!sent && sent.error() == canopy::channel_errc::full) {
        each->joined = false;
        each->outbox.close();
        each->kick();
        stats_->dropped.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  canopy::mutex lock_;
  std::vector<std::shared_ptr<member>> live_;  // every connection; under lock_
  bool closing_ = false;                       // under lock_
  counters* stats_;
};

using connection = std::variant<canopy::io::tcp_stream, canopy::io::unix_stream>;

// Appends `line` to the transcript on a blocking-pool thread.
inline canopy::task<void> append_transcript(int fd, std::string line) {
  if (fd < 0) {
    co_return;
  }
  // Named, then moved in: GCC 12 destroys twice the captures of a lambda
  // temporary written inside a co_await expression.
  auto append = [fd, text = std::move(line)] {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
      if (wrote < 0 && errno != EINTR) {
        return errno;
      }
      done += wrote > 0 ? static_cast<std::size_t>(wrote) : 0;
    }
    return 0;
  };
  const int failed = co_await canopy::run_blocking(std::move(append));
  if (failed != 0) {  // the chat goes on without this line in the transcript
    std::fprintf(stderr, "chat: transcript: %s\n", std::strerror(failed));
  }
}

// Sends the outbox's lines, a batch per write, until it is closed and empty
// or the peer goes; then shuts the write side (the client sees EOF).
template <class Stream>
canopy::task<void> write_loop(std::shared_ptr<stream_member<Stream>> self,
                              std::stop_token deadline) {
  std::string batch;
  while (std::optional<std::string> line = co_await self->outbox.recv()) {
    batch = std::move(*line);
    while (batch.size() < 64 * 1024) {
      canopy::recv_result<std::string> more = self->outbox.try_recv();
      if (!more) {
        break;
      }
      batch += *more;
    }
    std::error_code error;
    const auto wrote = co_await canopy::race(canopy::io::write_all(self->stream, batch, error),
                                             canopy::stopped(self->dropped.get_token()),
                                             canopy::stopped(deadline));
    if (!operation_won(wrote) || error) {
      self->kick();  // the reader ends too
      co_return;
    }
  }
  (void)self->stream.shutdown(SHUT_WR);
}

template <class Stream>
canopy::task<void> serve_client(room& chat_room, Stream stream, const options& config,
                                counters& stats, int transcript, std::stop_token deadline) {
  const int buffer_bytes = config.send_buffer;
  ::setsockopt(stream.native_handle(), SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
  auto self = std::make_shared<stream_member<Stream>>(std::move(stream), config.outbox_lines);
  co_await chat_room.enter(self);
  auto writer = canopy::spawn(write_loop(self, deadline));

  // The writer task writes to the same stream meanwhile (one operation per
  // direction is what a stream allows); a kick() or the drain deadline ends
  // the read waiting here.
  canopy::io::buffered_reader<Stream&> reader(self->stream);
  bool named = false;
  for (bool open = true; open;) {
    std::error_code error;
    auto got = co_await canopy::race(reader.read_line(config.max_line, error),
                                     canopy::stopped(self->dropped.get_token()),
                                     canopy::stopped(deadline));
    if (!operation_won(got)) {
      break;  // kicked, or the drain deadline passed
    }
    std::optional<std::string> line = std::move(got.template get<0>());
    if (!line && error != std::errc::message_size) {
      break;  // EOF or a reset
    }
    std::string_view problem;
    if (!line) {
      problem = "line too long";
    } else if (!named && (line->empty() || line->size() > 32 ||
                          line->find_first_of(" \t*:") != std::string::npos)) {
      problem = "a name is 1..32 bytes without spaces, '*' or ':'";
    }
    if (!problem.empty()) {
      stats.rejected.fetch_add(1, std::memory_order_relaxed);
      (void)self->outbox.try_send("* error: " + std::string(problem) + "\n");
      open = false;
    } else if (!named) {
      self->name = std::move(*line);
      named = true;
      open = co_await chat_room.join(*self);
      if (!open) {
        (void)self->outbox.try_send("* server shutting down\n");
      }
    } else {
      std::string said = self->name + ": " + *line + "\n";
      co_await append_transcript(transcript, said);
      co_await chat_room.say(*self, std::move(said));
    }
  }
  co_await chat_room.leave(*self);  // closes the outbox: the writer flushes and ends
  co_await writer;
  co_await chat_room.forget(self.get());
}

template <class Listener>
canopy::task<void> accept_loop(Listener& listener, canopy::channel<connection>& accepted) {
  for (;;) {
    std::error_code error;
    auto peer = co_await listener.accept(error);
    if (error == std::errc::operation_canceled || error == std::errc::bad_file_descriptor) {
      co_return;
    }
    if (error) {  // EMFILE and friends: keep serving the open connections
      co_await canopy::sleep_for(10ms);
      continue;
    }
    if (!co_await accepted.send(connection(std::move(peer)))) {
      co_return;  // stopping: the connection handed back is closed
    }
  }
}

// Waits for SIGINT/SIGTERM or max_run, then ends the accepted channel,
// which tells the server task to stop.
inline canopy::task<void> watch_for_stop(canopy::channel<connection>& accepted,
                                         std::chrono::milliseconds max_run,
                                         std::atomic<int>& stopped_by) {
  canopy::io::signal_set stop{SIGINT, SIGTERM};
  canopy::task<int> signalled = stop.wait();
  canopy::io::timeout_result<int> got =
      co_await canopy::with_timeout(max_run, std::move(signalled));
  if (got) {
    stopped_by.store(*got, std::memory_order_relaxed);
  }
  accepted.close();
}

}  // namespace detail

class server {
 public:
  // Binds the listeners (errors throw: std::system_error naming the
  // address) and starts serving. See the top of this file for signals.
  explicit server(options config)
      : config_(std::move(config)),
        blocked_((canopy::io::block_signals({SIGINT, SIGTERM}), true)),
        pool_(make_config(config_.workers)),
        timers_(pool_),
        room_(stats_) {
    std::vector<canopy::io::endpoint> found =
        canopy::block_on(pool_, canopy::io::resolve(config_.host, std::to_string(config_.port)));
    canopy::io::reactor& reactor = canopy::io::reactor::of(pool_);
    tcp_ = canopy::io::tcp_listener::bind(reactor, found.front());
    if (!config_.unix_path.empty()) {
      unix_ = canopy::io::unix_listener::bind(reactor,
                                              canopy::io::unix_endpoint::path(config_.unix_path));
    }
    if (!config_.transcript.empty()) {
      transcript_ =
          ::open(config_.transcript.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (transcript_ < 0) {
        throw std::system_error(errno, std::system_category(),
                                "chat: cannot open " + config_.transcript);
      }
    }
    running_ = pool_.spawn(run());
  }
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  ~server() {
    if (!finished_) {
      try {
        (void)wait();
      } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor reports nothing
      }
    }
    pool_.shutdown();
    if (transcript_ >= 0) {
      ::close(transcript_);
    }
  }

  [[nodiscard]] canopy::io::endpoint tcp_endpoint() const { return tcp_.local_endpoint(); }

  // Blocks until the server stopped and every client is gone. Rethrows
  // what ended the server task, if it failed (then only the first time).
  report wait() {
    if (!finished_) {
      finished_ = true;
      running_.get();
    }
    report result;
    result.signal = stopped_by_.load(std::memory_order_relaxed);
    result.clients = stats_.clients.load(std::memory_order_relaxed);
    result.lines = stats_.lines.load(std::memory_order_relaxed);
    result.dropped = stats_.dropped.load(std::memory_order_relaxed);
    result.rejected = stats_.rejected.load(std::memory_order_relaxed);
    result.forced = stats_.forced.load(std::memory_order_relaxed);
    result.drain_time = drain_time_;
    return result;
  }

 private:
  static canopy::executor_config make_config(std::size_t workers) {
    canopy::executor_config config = canopy::io::with_reactor();
    config.worker_count = workers;
    return config;
  }

  canopy::task<void> run() {
    canopy::channel<detail::connection> accepted(64);
    canopy::task_group<void> background;
    background.spawn(detail::watch_for_stop(accepted, config_.max_run, stopped_by_));
    background.spawn(detail::accept_loop(tcp_, accepted));
    if (unix_.is_open()) {
      background.spawn(detail::accept_loop(unix_, accepted));
    }
    canopy::task_group<void> clients;
    while (std::optional<detail::connection> next = co_await accepted.recv()) {
      stats_.clients.fetch_add(1, std::memory_order_relaxed);
      std::visit(
          [&](auto& stream) {
            clients.spawn(
                detail::serve_client(room_, std::move(stream), config_, stats_, transcript_,
                                     past_deadline_.get_token()));
          },
          *next);
    }
    // Stopping. 1: no more connections (the accept loops are cancelled,
    // then the listeners closed: the Unix one removes its file).
    const auto stopped_at = std::chrono::steady_clock::now();
    co_await background.close();
    tcp_.close();
    unix_.close();
    // 2: every client hears it and its channel ends; 3: at the deadline,
    // the clients still connected are stopped: their reads and writes end,
    // and each closes its connection as it leaves.
    co_await room_.shut("* server shutting down\n");
    auto ended = clients.all_ended();
    const auto drained = co_await canopy::with_timeout(config_.drain_deadline, ended);
    if (!drained) {
      stats_.forced.store(clients.running(), std::memory_order_relaxed);
      past_deadline_.request_stop();
    }
    co_await clients.wait_all();
    drain_time_ = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - stopped_at);
  }

  options config_;
  bool blocked_;
  canopy::executor pool_;
  canopy::io::reactor_timers timers_;
  detail::counters stats_;
  detail::room room_;
  canopy::io::tcp_listener tcp_;
  canopy::io::unix_listener unix_;
  int transcript_ = -1;
  std::atomic<int> stopped_by_{0};
  std::stop_source past_deadline_;  // requested when the drain deadline passed
  std::chrono::milliseconds drain_time_{0};  // written by run(), read after its join
  bool finished_ = false;
  canopy::join_handle<void> running_;
};

}  // namespace chat
