// http_handler — what answers a request: the type-erased
// canopy::io::http::handler and canopy::io::http::router (the response and
// the response_writer are in http_response.hpp). The contract is at the top
// of <canopy/io/http.hpp>.
//
// Mechanism: a handler holds the callable once (a shared_ptr, made when the
// handler is, copied per connection: no allocation per request) and one
// function pointer that calls it. Every form is reduced to "append to the
// output, or return a task to await": an empty task<response> (no frame,
// nothing allocated) says the answer was appended already, so a synchronous
// handler costs the connection one indirect call and one test per request;
// a coroutine handler's task is awaited inline by the connection (symmetric
// transfer, no spawn). A streaming handler is called through a coroutine
// of the handler's that makes its response_writer on the connection's
// body_sink (passed only on this form's path), so the other forms pay for
// streaming with one more argument and nothing else.
#pragma once

#include <concepts>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../coroutine/task.hpp"
#include "http_parser.hpp"
#include "http_response.hpp"

namespace canopy::io::http {

class handler {
 public:
  // The form a connection calls: appends the answer to `out` and returns an
  // empty task, or returns a task to await for the answer.
  using call_type = task<response> (*)(void* state, const request& req, std::string& out,
                                       detail::body_sink* sink);

  handler() noexcept = default;  // empty: serve() refuses it
  // The plain form: appends one complete response (append_response).
  handler(void (*respond)(const request&, std::string&)) noexcept  // NOLINT: implicit by design
      : plain_(respond) {}

  template <class F>
  requires(!std::is_same_v<std::decay_t<F>, handler> &&
           (std::is_invocable_v<std::decay_t<F>&, const request&, std::string&> ||
            std::is_invocable_v<std::decay_t<F>&, const request&> ||
            std::is_invocable_v<std::decay_t<F>&, const request&, response_writer&>))
      handler(F&& callable)  // NOLINT: implicit by design
  {
    using C = std::decay_t<F>;
    if constexpr (std::is_convertible_v<C, void (*)(const request&, std::string&)>) {
      plain_ = callable;  // a lambda without captures: no state to keep
      return;
    } else if constexpr (std::is_constructible_v<bool, const C&>) {
      if (!static_cast<bool>(callable)) {
        return;  // an empty std::function or a null pointer: an empty handler
      }
    }
    if constexpr (!std::is_convertible_v<C, void (*)(const request&, std::string&)>) {
      state_ = std::make_shared<C>(std::forward<F>(callable));
      call_ = &call<C>;
    }
  }

  [[nodiscard]] explicit operator bool() const noexcept {
    return plain_ != nullptr || call_ != nullptr;
  }

  // Answers `req`: appended to `out` (the task is empty), or the task to
  // co_await for the response. The server completes what it gets. `sink`:
  // the connection's, for a streaming handler (without one, its body is
  // collected and returned whole); after the task, sink->streamed says the
  // answer went through it and the returned response is to be ignored.
  task<response> operator()(const request& req, std::string& out,
                            detail::body_sink* sink = nullptr) const {
    if (plain_ != nullptr) {
      plain_(req, out);
      return {};
    }
    return call_(state_.get(), req, out, sink);
  }

 private:
  template <class C>
  static task<response> stream(C& callable, const request& req, detail::body_sink* sink) {
    response_writer writer(req, sink);
    co_await callable(req, writer);
    co_return writer.finish();
  }

  template <class C>
  static task<response> call(void* state, const request& req, std::string& out,
                             detail::body_sink* sink) {
    C& callable = *static_cast<C*>(state);
    if constexpr (std::is_invocable_v<C&, const request&, std::string&, detail::body_sink*>) {
      return callable(req, out, sink);  // the router's form: passes the sink on
    } else if constexpr (std::is_invocable_v<C&, const request&, response_writer&>) {
      static_assert(
          std::is_same_v<std::invoke_result_t<C&, const request&, response_writer&>, task<void>>,
          "canopy::io::http::handler: a callable taking (request, response_writer&) "
          "returns task<void>");
      return stream(callable, req, sink);
    } else if constexpr (std::is_invocable_v<C&, const request&, std::string&>) {
      using R = std::invoke_result_t<C&, const request&, std::string&>;
      if constexpr (std::is_same_v<R, task<response>>) {
        return callable(req, out);
      } else {
        static_assert(std::is_void_v<R>,
                      "canopy::io::http::handler: a callable taking (request, std::string&) "
                      "returns void (it appends the answer) or task<response>");
        callable(req, out);
        return {};
      }
    } else {
      using R = std::invoke_result_t<C&, const request&>;
      if constexpr (std::is_same_v<R, task<response>>) {
        return callable(req);
      } else if constexpr (std::is_same_v<R, response>) {
        append_response(out, callable(req), !req.keep_alive);
        return {};
      } else {
        static_assert(std::is_convertible_v<R, std::string_view>,
                      "canopy::io::http::handler: a callable taking (request) returns "
                      "response, task<response> or a string (the body of a 200 text/plain)");
        response ok;
        ok.body = std::string(callable(req));
        append_response(out, ok, !req.keep_alive);
        return {};
      }
    }
  }

  void (*plain_)(const request&, std::string&) = nullptr;
  std::shared_ptr<void> state_;
  call_type call_ = nullptr;
};

// Method and path to handler. A path ending in '*' matches every target path
// that starts with what comes before the '*'; any other matches the target's
// path exactly. The target's path: before '?'; of an absolute-form target
// ("http://host/p?q", RFC 9112 3.2.2), what follows the authority ("/" if
// nothing does). The first route added that matches wins. A target
// no route's path matches gets 404; one whose path matches but not its
// method gets 405 with an Allow field naming the methods that would (GET
// also allows HEAD). Routes are added before serving; the router is then
// read only, from every connection.
class router {
 public:
  // std::invalid_argument for an empty method or path, a path not starting
  // with '/' (or "*"), or an empty handler.
  router& add(std::string_view method, std::string_view path, handler respond);
  router& get(std::string_view path, handler respond) {
    return add("GET", path, std::move(respond));
  }
  router& post(std::string_view path, handler respond) {
    return add("POST", path, std::move(respond));
  }

  // Answers as the route's handler does (passing `sink` on), or 404/405
  // (appended).
  task<response> operator()(const request& req, std::string& out,
                            detail::body_sink* sink = nullptr) const;

 private:
  struct route {
    std::string method;
    std::string path;  // without the trailing '*' of a prefix
    bool prefix = false;
    handler respond;
  };
  std::vector<route> routes_;
};

}  // namespace canopy::io::http
