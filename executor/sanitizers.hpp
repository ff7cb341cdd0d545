// Which sanitizer a translation unit is built with, under either compiler.
// g++ defines __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; Clang defines
// neither and answers __has_feature instead. Code that must tell the
// sanitizers about what they cannot see (a fiber's stack switch, memory a
// pool keeps) tests CANOPY_ADDRESS_SANITIZER and CANOPY_THREAD_SANITIZER,
// so that a Clang build gets the same annotations as a g++ one.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define CANOPY_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CANOPY_ADDRESS_SANITIZER 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define CANOPY_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CANOPY_THREAD_SANITIZER 1
#endif
#endif
