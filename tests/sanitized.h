// Whether this test program was built with AddressSanitizer or ThreadSanitizer (GCC defines
// __SANITIZE_*__, Clang answers __has_feature): tests that would take many minutes at the
// sanitizers' speed run less of their input there, or leave it to the Release suite.
#pragma once

namespace edgelm::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace edgelm::test
