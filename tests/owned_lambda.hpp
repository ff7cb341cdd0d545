// owned — runs a coroutine lambda with its closure kept alive in the
// task's frame. An immediately invoked lambda's captures die with the full
// expression, while the coroutine it returns still reads them.
#pragma once

namespace canopy::testing {

template <class F>
auto owned(F body) -> decltype(body()) {
  co_return co_await body();
}

}  // namespace canopy::testing
