// <immintrin.h> for the files compiled with the AVX-512 flags (avx512.cpp, avx512_quant.cpp).
// GCC 12's AVX-512 intrinsics build their "undefined" vectors from self-initialised variables and
// then warn about them at every use (GCC bug 105593, fixed in GCC 13); the warnings are silenced
// for the header alone.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
