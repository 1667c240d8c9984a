// Shared pieces of the parity matrix (tests/parity/cases*.cpp): the tolerances, the helpers the
// case files use to make inputs and names, and one function per op family that appends its cases.
// Each op lists its dtype combinations (including some no backend supports, to show skips) and at
// least three shapes: odd sizes and SIMD tile boundaries (15/16/17, 33, 65, multi-block K).
// Tolerances are max NMSE against the double-precision reference; each is justified where it is
// set. Exact ops (data movement, decoding, rounding casts) use 0.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/parity/parity.h"

namespace edgelm::parity {

using Expected = std::vector<std::vector<double>>;

// A float32 result of one rounding: relative error ≤ 2^-24, NMSE ≤ 2^-48 ≈ 3.6e-15.
inline constexpr double kOneRounding = 1e-12;
// A float32 computation with a few roundings or a float32 accumulation over up to ~2k terms
// (fast kernels): relative error ~ sqrt(n)·2^-24 → NMSE ≲ 1e-11; 1e-10 leaves headroom while any
// real bug (a wrong index, a dropped term) gives NMSE far above 1e-6.
inline constexpr double kFloatMath = 1e-10;
// Quantized matmul may quantize activations to 8 bits per 32-block (as GGML's dot products do):
// step max|x|/127, error variance step²/12 → NMSE ≈ 3e-5 on Gaussian rows on average. Cases with
// only a few outputs scatter around that (the SIMD kernels measure up to 8.6e-5 over 30 seeds),
// so the bound is 10x the mean; a real bug (wrong nibble, scale or block) gives NMSE > 1e-2.
inline constexpr double kQuantizedActivations = 3e-4;
// Quantizing casts are compared with their input, so the tolerance is the format's own error on
// Gaussian data: Q8_0 ≈ 2e-5 (step max/127), Q4_0 ≈ 6e-3 (step max/8); bounds with 3-5x headroom.
// Q4_1's step (max - min)/15 is a little smaller than Q4_0's, Q5_0's and Q5_1's (max/16,
// (max - min)/31) about half that: NMSE ≈ 6e-3, 1.8e-3 and 1.4e-3 (up to 1.1e-2, 2.6e-3 and
// 2.1e-3 on one-block rows over five seeds).
inline constexpr double kQ8_0Format = 1e-4;
inline constexpr double kQ4_0Format = 2e-2;
inline constexpr double kQ4_1Format = 2e-2;
inline constexpr double kQ5Format = 6e-3;

// A uniform integer in [low, high].
int64_t uniform_int(std::mt19937_64& rng, int64_t low, int64_t high);
// `count` distinct sorted values from [0, range).
std::vector<double> sorted_subset(std::mt19937_64& rng, int64_t range, int64_t count);
// The shape part of a case name: dims({{"M", 5}, {"N", 7}}) is "M5_N7".
std::string dims(std::initializer_list<std::pair<const char*, int64_t>> named);

// Rows for the cases with non-finite inputs: row m of [M, K] normal values gets pattern
// (first + m) % 5: a NaN, +inf or -inf at a random position; one whole 32-block of values around
// 1e-38, too small for the 8-bit rounding of x to scale (it rounds them to zeros); or nothing.
enum class Spoil { kNaN, kPositiveInf, kNegativeInf, kTinyBlock, kNone, kCount };

// [M, K] normal values of standard deviation `scale`, spoiled row by row as above.
std::vector<double> spoiled_rows(std::mt19937_64& rng, int64_t M, int64_t K, Spoil first,
                                 double scale = 1.0);

// One function per op family, each appending its cases (all_cases() calls them in this order).
void embed_cases(std::vector<OpCase>& cases);        // cases_matmul.cpp
void matmul_cases(std::vector<OpCase>& cases);       // cases_matmul.cpp
void rms_norm_cases(std::vector<OpCase>& cases);     // cases_elementwise.cpp
void rope_cases(std::vector<OpCase>& cases);         // cases_attention.cpp
void attention_cases(std::vector<OpCase>& cases);    // cases_attention.cpp
void elementwise_cases(std::vector<OpCase>& cases);  // cases_elementwise.cpp
void cast_cases(std::vector<OpCase>& cases);         // cases_elementwise.cpp
void kv_append_cases(std::vector<OpCase>& cases);    // cases_movement.cpp
void kv_compact_cases(std::vector<OpCase>& cases);   // cases_movement.cpp
void copy_cases(std::vector<OpCase>& cases);         // cases_movement.cpp

}  // namespace edgelm::parity
