// Everything for C++20 coroutine tasks (docs/coroutines.md).
#pragma once

#include "async_event.hpp"
#include "block_on.hpp"
#include "custom_wait.hpp"
#include "foreign_await.hpp"
#include "host.hpp"
#include "join_await.hpp"
#include "spawn.hpp"
#include "task.hpp"
#include "task_handle.hpp"
#include "waker.hpp"
#include "when_all.hpp"
#include "yield.hpp"
