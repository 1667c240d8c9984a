# Finds the 8-bit PCRE2 library (the tokenizer's regexes) and defines the target edgelm_pcre2.
#
# EDGELM_PCRE2_ROOT=<prefix>: use the pcre2.h and libpcre2-8 installed under that prefix and nothing
# else. This is for cross builds without pkg-config (Android): PCRE2 built from its release source
# with CMake or configure installs include/pcre2.h and lib/libpcre2-8.a (or .so) in every release,
# while its CMake package moved (cmake/ up to 10.44, lib/cmake/pcre2/ from 10.45) and the build
# machine may have no pkg-config. The prefix is searched as given, outside the toolchain's find
# root (the NDK's toolchain re-roots every search path under its find root otherwise).
# Unset: pkg-config's libpcre2-8 (Debian: libpcre2-dev; multiarch :arm64 for the aarch64 build).
set(EDGELM_PCRE2_ROOT "" CACHE PATH
    "Prefix holding include/pcre2.h and lib/libpcre2-8 (empty: found through pkg-config)")

add_library(edgelm_pcre2 INTERFACE)
if(NOT EDGELM_PCRE2_ROOT STREQUAL "")
  if(NOT IS_DIRECTORY "${EDGELM_PCRE2_ROOT}")
    message(FATAL_ERROR "EDGELM_PCRE2_ROOT '${EDGELM_PCRE2_ROOT}' is not a directory")
  endif()
  # find_* cache their results: forget them when the prefix changes.
  if(NOT EDGELM_PCRE2_ROOT STREQUAL EDGELM_PCRE2_ROOT_SEARCHED)
    unset(EDGELM_PCRE2_INCLUDE_DIR CACHE)
    unset(EDGELM_PCRE2_LIBRARY CACHE)
  endif()
  set(EDGELM_PCRE2_ROOT_SEARCHED "${EDGELM_PCRE2_ROOT}" CACHE INTERNAL "")
  find_path(EDGELM_PCRE2_INCLUDE_DIR pcre2.h PATHS "${EDGELM_PCRE2_ROOT}/include"
            NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  # The static library first: the device programs then need no shared library beside them.
  find_library(EDGELM_PCRE2_LIBRARY NAMES libpcre2-8.a pcre2-8
               PATHS "${EDGELM_PCRE2_ROOT}/lib" "${EDGELM_PCRE2_ROOT}/lib64"
               NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  if(NOT EDGELM_PCRE2_INCLUDE_DIR OR NOT EDGELM_PCRE2_LIBRARY)
    message(FATAL_ERROR "EDGELM_PCRE2_ROOT '${EDGELM_PCRE2_ROOT}' holds no include/pcre2.h and "
                        "lib/libpcre2-8 (install PCRE2 there: docs/android.md)")
  endif()
  message(STATUS "PCRE2: ${EDGELM_PCRE2_LIBRARY}")
  target_include_directories(edgelm_pcre2 INTERFACE "${EDGELM_PCRE2_INCLUDE_DIR}")
  target_link_libraries(edgelm_pcre2 INTERFACE "${EDGELM_PCRE2_LIBRARY}")
else()
  # pkg-config would read the build machine's .pc files and link its PCRE2 into an Android program.
  if(ANDROID AND NOT DEFINED ENV{PKG_CONFIG_LIBDIR})
    message(FATAL_ERROR "PCRE2: an Android build needs EDGELM_PCRE2_ROOT (the android-arm64 preset "
                        "takes it from the environment variable EDGELM_ANDROID_DEPS) or "
                        "PKG_CONFIG_LIBDIR naming the target's .pc folder: docs/android.md")
  endif()
  find_package(PkgConfig)
  if(NOT PKG_CONFIG_FOUND)
    message(FATAL_ERROR "PCRE2: pkg-config not found; install it, or set -DEDGELM_PCRE2_ROOT to "
                        "the prefix PCRE2 is installed in")
  endif()
  pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
  target_link_libraries(edgelm_pcre2 INTERFACE PkgConfig::PCRE2)
endif()
