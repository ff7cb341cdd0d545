// A program run as a child process for the tests that drive real clients
// and servers (curl, ab, the examples).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tests/watchdog.hpp"

extern char** environ;

namespace canopy::testing {

inline std::chrono::steady_clock::time_point deadline_after(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds * timeout_scale()));
}

// A program run as a child process (posix_spawnp: looked up in PATH; safe
// in this multi-threaded process), its stdin /dev/null, its stdout and
// stderr together in one pipe read here. Every wait has a time limit
// (stretched by CANOPY_TIMEOUT_SCALE); past it the child is killed, so a
// hung client or server fails the test instead of hanging it.
class child_process {
 public:
  explicit child_process(std::vector<std::string> argv) : argv_(std::move(argv)) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    std::vector<char*> args;
    for (std::string& argument : argv_) {
      args.push_back(argument.data());
    }
    args.push_back(nullptr);
    const int failed = ::posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    output_fd_ = fds[0];
    if (failed != 0) {
      pid_ = -1;
    }
    // Fails, not skips: ./run.sh installs curl and apache2-utils (ab).
    REQUIRE_MESSAGE(failed == 0, "cannot run ", argv_[0], ": ", std::strerror(failed),
                    " (./run.sh test installs curl and apache2-utils)");
  }
  ~child_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (output_fd_ >= 0) {
      ::close(output_fd_);
    }
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  // Reads output until it holds `text` (true), the output ends, or
  // `seconds` (scaled) pass.
  bool read_until(std::string_view text, double seconds) {
    const auto deadline = deadline_after(seconds);
    while (output_.find(text) == std::string::npos) {
      if (!read_some(deadline)) {
        return output_.find(text) != std::string::npos;
      }
    }
    return true;
  }

  // Reads the output to its end and reaps the child; one that has not
  // exited within `seconds` (scaled) is killed. The exit status, or 128 +
  // the signal that ended it.
  int wait(double seconds) {
    const auto deadline = deadline_after(seconds);
    while (read_some(deadline)) {
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out_ = true;
      ::kill(pid_, SIGKILL);
    }
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void signal(int number) const { REQUIRE(::kill(pid_, number) == 0); }
  // The child's process id (-1 once reaped).
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  [[nodiscard]] const std::string& output() const noexcept { return output_; }
  [[nodiscard]] bool timed_out() const noexcept { return timed_out_; }

 private:
  // One read of the output; false at its end or at the deadline.
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd readable{output_fd_, POLLIN, 0};
    const int ready = ::poll(&readable, 1, static_cast<int>(left.count()) + 1);
    if (ready < 0 && errno == EINTR) {
      return true;
    }
    if (ready <= 0) {
      return false;
    }
    char buffer[4096];
    const ssize_t got = ::read(output_fd_, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) {
      return true;
    }
    if (got <= 0) {
      return false;
    }
    output_.append(buffer, static_cast<std::size_t>(got));
    return true;
  }

  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  int output_fd_ = -1;
  std::string output_;
  bool timed_out_ = false;
};

}  // namespace canopy::testing
