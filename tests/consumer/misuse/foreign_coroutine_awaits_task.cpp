// expect: canopy awaitables can only be co_awaited inside a canopy::task
// Another library's coroutine awaits a canopy::task: the first error is
// Canopy's explanation, not a missing member of the foreign promise.
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

canopy::task<int> answer() { co_return 42; }

other_task caller() { co_await answer(); }

int main() { caller(); }
