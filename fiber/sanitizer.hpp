// Announcing fiber switches to the sanitizers.
//
// TSan and ASan track one stack per thread; a Boost.Context switch moves a
// thread onto another stack behind their back. Compiled in only under
// -fsanitize=thread / -fsanitize=address, by either compiler
// (executor/sanitizers.hpp); otherwise every hook is empty.
//   TSan: each fiber has a TSan fiber object (__tsan_create_fiber at
//         spawn, __tsan_destroy_fiber after it ended); before every jump the
//         jumping side calls __tsan_switch_to_fiber(destination).
//   ASan: before every jump __sanitizer_start_switch_fiber(save, dest
//         bottom, dest size); right after arriving
//         __sanitizer_finish_switch_fiber(save, &source bottom, &source size).
//         A fiber's last jump passes a null save: its fake stack dies.
#pragma once

#include <cstddef>

#include "../executor/sanitizers.hpp"

#if defined(CANOPY_THREAD_SANITIZER)
#define CANOPY_TSAN_FIBERS 1
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif

#if defined(CANOPY_ADDRESS_SANITIZER)
#define CANOPY_ASAN_FIBERS 1
#include <sanitizer/common_interface_defs.h>
#endif
