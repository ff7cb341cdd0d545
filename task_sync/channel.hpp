// canopy::channel<T> and canopy::oneshot<T> over channel_core.hpp, with the
// coroutine forms (co_await ch.send(v) / ch.recv()). The contract is at the
// top of include/canopy/channel.hpp; the fiber forms are in fiber_forms.hpp.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "../coroutine/coroutine.hpp"
#include "channel_core.hpp"

namespace canopy {

enum class channel_errc { closed = 1, full = 2, empty = 3 };

namespace detail {
class channel_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "canopy.channel"; }
  std::string message(int value) const override {
    switch (static_cast<channel_errc>(value)) {
      case channel_errc::closed:
        return "the channel is closed";
      case channel_errc::full:
        return "the channel is full";
      case channel_errc::empty:
        return "the channel is empty";
    }
    return "unknown channel error";
  }
};
}  // namespace detail

inline const std::error_category& channel_category() noexcept {
  static const detail::channel_category_impl category;
  return category;
}
inline std::error_code make_error_code(channel_errc value) noexcept {
  return {static_cast<int>(value), channel_category()};
}

}  // namespace canopy

template <>
struct std::is_error_code_enum<canopy::channel_errc> : std::true_type {};

namespace canopy {

// What a send reports: success, or the error (closed; full for try_send)
// with the value handed back.
template <class T>
class send_result {
 public:
  send_result() noexcept = default;
  send_result(channel_errc error, T&& value) : value_(std::move(value)), error_(error) {}

  [[nodiscard]] explicit operator bool() const noexcept { return error_ == channel_errc{}; }
  [[nodiscard]] std::error_code error() const noexcept {
    return error_ == channel_errc{} ? std::error_code() : make_error_code(error_);
  }
  // The value that was not sent. std::logic_error after a successful send.
  [[nodiscard]] T& value() {
    if (!value_) {
      throw std::logic_error(
          "canopy::send_result::value(): the send succeeded, no value came back");
    }
    return *value_;
  }

 private:
  std::optional<T> value_;
  // Kept as the enum (0: sent), not a std::error_code: a default
  // error_code calls into the library (std::system_category()) on every
  // successful send.
  channel_errc error_{};
};

// What try_recv reports: a value, or why none (empty, closed).
template <class T>
class recv_result {
 public:
  recv_result(std::optional<T>&& value, channel_errc error)
      : value_(std::move(value)), error_(error) {}
  [[nodiscard]] explicit operator bool() const noexcept { return value_.has_value(); }
  [[nodiscard]] std::error_code error() const noexcept {
    return error_ == channel_errc{} ? std::error_code() : make_error_code(error_);
  }
  // The value. std::system_error with error() when there is none.
  [[nodiscard]] T& value() {
    if (!value_) {
      throw std::system_error(error(), "canopy::recv_result::value()");
    }
    return *value_;
  }
  [[nodiscard]] const T& value() const {
    if (!value_) {
      throw std::system_error(error(), "canopy::recv_result::value()");
    }
    return *value_;
  }
  // value(), as std::optional spells it (throws the same way).
  [[nodiscard]] T& operator*() { return value(); }
  [[nodiscard]] const T& operator*() const { return value(); }
  [[nodiscard]] T* operator->() { return &value(); }
  [[nodiscard]] const T* operator->() const { return &value(); }

 private:
  std::optional<T> value_;
  channel_errc error_;  // 0 with a value (as send_result's)
};

template <class T>
class channel;

namespace detail {

template <class T>
using channel_state = basic_channel<T, waker>;

// The wait source of co_await ch.send(v): tries without waiting first
// (ready), then queues its node holding the value (arm).
template <class T>
class send_op {
 public:
  send_op(channel_state<T>& state, T&& value) : state_(&state), value_(std::move(value)) {}
  send_op(send_op&& other) noexcept(std::is_nothrow_move_constructible_v<T>)
      : state_(other.state_), value_(std::move(other.value_)), outcome_(other.outcome_) {}
  send_op& operator=(send_op&&) = delete;

  bool ready() noexcept {
    if (outcome_ == unknown && !armed_) {
      const channel_op seen = state_->try_send(*value_);
      outcome_ = seen == channel_op::ok ? sent : seen == channel_op::closed ? closed : unknown;
    }
    return outcome_ != unknown || node_.observed() != waiter_waiting;
  }
  bool arm(const waker& wake) {
    armed_ = true;
    node_.value = &*value_;
    return state_->arm_send(node_, wake);
  }
  void disarm() noexcept { state_->disarm(node_, true); }
  // A value a receiver took from the queued node is delivered: a cancel
  // that lands afterwards must not report the send as not done. (disarm is
  // idempotent: it unlists the node only while it is listed.)
  static constexpr bool completion_kept = true;
  send_result<T> result() {
    if (outcome_ == sent || (outcome_ == unknown && node_.observed() == waiter_done)) {
      return {};
    }
    return send_result<T>(channel_errc::closed, std::move(*value_));
  }

  auto operator co_await() && { return canopy::wait_on(std::move(*this)); }

 private:
  enum : unsigned char { unknown, sent, closed };
  channel_state<T>* state_;
  std::optional<T> value_;
  unsigned char outcome_ = unknown;
  bool armed_ = false;
  channel_send_waiter<T, waker> node_;
};

// The wait source of co_await ch.recv(): std::optional<T>, empty once the
// channel is closed and drained.
template <class T>
class recv_op {
 public:
  explicit recv_op(channel_state<T>& state) noexcept : state_(&state) {}
  recv_op(recv_op&& other) noexcept : state_(other.state_) {}
  recv_op& operator=(recv_op&&) = delete;
  ~recv_op() {
    // Woken with a value promised, but destroyed (cancelled) before taking
    // it: the promise goes to the next receiver.
    if (armed_ && !taken_ && node_.observed() == waiter_done) {
      state_->drop_reservation();
    }
  }

  bool ready() noexcept {
    if (outcome_ == unknown && !armed_) {
      const channel_op seen = state_->try_recv(value_);
      outcome_ = seen == channel_op::ok ? got : seen == channel_op::closed ? closed : unknown;
    }
    return outcome_ != unknown || node_.observed() != waiter_waiting;
  }
  bool arm(const waker& wake) {
    armed_ = true;
    return state_->arm_recv(node_, wake);
  }
  void disarm() noexcept { state_->disarm(node_, false); }
  std::optional<T> result() {
    if (outcome_ == unknown && node_.observed() == waiter_done) {
      taken_ = true;
      state_->take_promised(value_);
    }
    return std::move(value_);
  }

  auto operator co_await() && { return canopy::wait_on(std::move(*this)); }

 private:
  enum : unsigned char { unknown, got, closed };
  channel_state<T>* state_;
  std::optional<T> value_;
  unsigned char outcome_ = unknown;
  bool armed_ = false;
  bool taken_ = false;
  channel_recv_waiter<waker> node_;
};

}  // namespace detail

template <class T>
class channel {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "canopy::channel<T>: T's move constructor must not throw");

 public:
  // std::invalid_argument for a capacity of 0.
  explicit channel(std::size_t capacity) : state_(capacity) {}
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  // co_await: send_result<T>; waits while the channel is full.
  [[nodiscard]] detail::send_op<T> send(T value) {
    return detail::send_op<T>(state_, std::move(value));
  }
  // co_await: std::optional<T>; waits while the channel is empty; empty
  // optional once closed and drained.
  [[nodiscard]] detail::recv_op<T> recv() noexcept { return detail::recv_op<T>(state_); }

  // Never wait.
  send_result<T> try_send(T value) {
    switch (state_.try_send(value)) {
      case detail::channel_op::ok:
        return {};
      case detail::channel_op::full:
        return send_result<T>(channel_errc::full, std::move(value));
      default:
        return send_result<T>(channel_errc::closed, std::move(value));
    }
  }
  recv_result<T> try_recv() {
    std::optional<T> value;
    switch (state_.try_recv(value)) {
      case detail::channel_op::ok:
        return recv_result<T>(std::move(value), {});
      case detail::channel_op::empty:
        return recv_result<T>(std::nullopt, channel_errc::empty);
      default:
        return recv_result<T>(std::nullopt, channel_errc::closed);
    }
  }

  void close() noexcept { state_.close(); }
  [[nodiscard]] bool is_closed() const noexcept { return state_.closed(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return state_.capacity(); }
  [[nodiscard]] std::size_t size() const noexcept { return state_.size(); }
  // Tasks waiting to send / to receive (snapshots, for tests and metrics).
  [[nodiscard]] std::size_t waiting_senders() const noexcept { return state_.waiting_senders(); }
  [[nodiscard]] std::size_t waiting_receivers() const noexcept {
    return state_.waiting_receivers();
  }

 private:
  detail::channel_state<T> state_;
};

// One value from one sender to one receiver. The sender's send() never
// waits; a sender destroyed without sending, or a second send, ends the
// receiver's wait with an empty optional / a closed error. A receiver
// destroyed (or assigned over) first makes send() fail with the value
// handed back.
template <class T>
class oneshot_sender {
 public:
  explicit oneshot_sender(std::shared_ptr<channel<T>> state) noexcept : state_(std::move(state)) {}
  oneshot_sender(oneshot_sender&&) noexcept = default;
  oneshot_sender& operator=(oneshot_sender&& other) noexcept {
    if (this != &other) {
      finish();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~oneshot_sender() { finish(); }

  send_result<T> send(T value) {
    if (!state_) {
      return send_result<T>(channel_errc::closed, std::move(value));
    }
    send_result<T> outcome = state_->try_send(std::move(value));
    finish();
    return outcome;
  }

 private:
  void finish() noexcept {
    if (state_) {
      state_->close();
      state_.reset();
    }
  }
  std::shared_ptr<channel<T>> state_;
};

template <class T>
class oneshot_receiver {
 public:
  explicit oneshot_receiver(std::shared_ptr<channel<T>> state) noexcept
      : state_(std::move(state)) {}
  oneshot_receiver(oneshot_receiver&&) noexcept = default;
  // The receiver assigned over is gone, as a destroyed one: its channel is
  // closed, so its sender's send fails with the value handed back instead
  // of succeeding into a channel nobody can receive from.
  oneshot_receiver& operator=(oneshot_receiver&& other) noexcept {
    if (this != &other) {
      finish();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~oneshot_receiver() { finish(); }
  // co_await: std::optional<T> (empty if the sender went without sending).
  [[nodiscard]] detail::recv_op<T> recv() {
    if (!state_) {
      throw std::logic_error("canopy::oneshot_receiver::recv() on a moved-from receiver");
    }
    return state_->recv();
  }
  recv_result<T> try_recv() {
    if (!state_) {
      throw std::logic_error("canopy::oneshot_receiver::try_recv() on a moved-from receiver");
    }
    return state_->try_recv();
  }

 private:
  void finish() noexcept {
    if (state_) {
      state_->close();
      state_.reset();
    }
  }
  std::shared_ptr<channel<T>> state_;
};

template <class T>
struct oneshot_pair {
  oneshot_sender<T> sender;
  oneshot_receiver<T> receiver;
};

// auto [tx, rx] = canopy::oneshot<T>(); one allocation, for both ends.
template <class T>
[[nodiscard]] oneshot_pair<T> oneshot() {
  auto state = std::make_shared<channel<T>>(1);
  return {oneshot_sender<T>(state), oneshot_receiver<T>(state)};
}

}  // namespace canopy
