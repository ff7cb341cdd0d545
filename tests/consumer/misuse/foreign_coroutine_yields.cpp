// expect: canopy awaitables can only be co_awaited inside a canopy::task
// Another library's coroutine awaits one of Canopy's awaitables.
#include <canopy/task.hpp>

#include <coroutine>
#include <exception>

struct other_task {
  struct promise_type {
    other_task get_return_object() { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
};

other_task caller() { co_await canopy::yield_now(); }

int main() { caller(); }
