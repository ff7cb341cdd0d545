// Everything for C++20 coroutine tasks (docs/coroutines.md), with the
// task-neutral waiting layer they build on (wait/: wakers, wait sources,
// task handles, async_event).
#pragma once

#include "../wait/async_event.hpp"
#include "../wait/task_handle.hpp"
#include "../wait/wait_source.hpp"
#include "../wait/waker.hpp"
#include "block_on.hpp"
#include "custom_wait.hpp"
#include "event_await.hpp"
#include "foreign_await.hpp"
#include "fork_join_await.hpp"
#include "fork_join_n_await.hpp"
#include "host.hpp"
#include "join_await.hpp"
#include "spawn.hpp"
#include "task.hpp"
#include "when_all.hpp"
#include "yield.hpp"
