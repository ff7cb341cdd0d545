// Everything for C++20 coroutine tasks (docs/coroutines.md).
#pragma once

#include "coroutine/async_event.hpp"
#include "coroutine/block_on.hpp"
#include "coroutine/join_await.hpp"
#include "coroutine/spawn.hpp"
#include "coroutine/task.hpp"
#include "coroutine/task_handle.hpp"
#include "coroutine/waker.hpp"
#include "coroutine/when_all.hpp"
#include "coroutine/yield.hpp"
