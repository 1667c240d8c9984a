// The run-time OpenCL loader (backends/opencl/cl_loader.*): where it looks, in which order, and
// the one line it throws when no candidate is a usable OpenCL library. These need no OpenCL
// library; the last test opens the real ICD loader when the machine has one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backends/opencl/cl_loader.h"
#include "backends/opencl/opencl_backend.h"
#include "core/error.h"
#include "tests/temp_dir.h"

namespace edgelm {
namespace {

using opencl::load_opencl_library;
using opencl::opencl_library_candidates;

std::string error_of(const std::vector<std::string>& candidates, bool from_env) {
  try {
    load_opencl_library(candidates, from_env);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(ClLoader, VariableNamesTheOnlyCandidate) {
  EXPECT_EQ(opencl_library_candidates("/opt/driver/libOpenCL.so"),
            std::vector<std::string>{"/opt/driver/libOpenCL.so"});
}

TEST(ClLoader, DefaultOrderIcdLoaderFirstThenPhoneVendorPaths) {
  const std::vector<std::string> expected = {"libOpenCL.so.1",
                                             "libOpenCL.so",
                                             "/vendor/lib64/libOpenCL.so",
                                             "/system/vendor/lib64/libOpenCL.so",
                                             "/system/lib64/libOpenCL.so",
                                             "/vendor/lib64/egl/libGLES_mali.so",
                                             "/system/vendor/lib64/egl/libGLES_mali.so"};
  EXPECT_EQ(opencl_library_candidates(nullptr), expected);
  EXPECT_EQ(opencl_library_candidates(""), expected);  // set but empty: as if unset
}

TEST(ClLoader, MissingLibraryFromVariableIsOneLine) {
  EXPECT_EQ(error_of({"/nonexistent/libOpenCL.so"}, true),
            "[opencl] no OpenCL library: tried $EDGELM_OPENCL_LIB=/nonexistent/libOpenCL.so "
            "(install an OpenCL driver or set EDGELM_OPENCL_LIB)");
}

// A library that loads but lacks the API is named with the first missing function, and the
// search goes on to the next candidate; a file that is no library carries the loader's reason.
TEST(ClLoader, EveryCandidateTriedInOrderWithWhyItWasRefused) {
  testing::TempDir dir("edgelm_cl_loader_");
  const std::string not_a_library = dir.file("libOpenCL.so");
  std::ofstream(not_a_library) << "not an ELF file\n";
  const std::string message =
      error_of({"/nonexistent/libOpenCL.so.1", "libm.so.6", not_a_library}, false);
  const std::string expected_start =
      "[opencl] no OpenCL library: tried /nonexistent/libOpenCL.so.1, "
      "libm.so.6 (has no clGetPlatformIDs), " +
      not_a_library + " (";
  EXPECT_EQ(message.rfind(expected_start, 0), 0u) << message;
  EXPECT_NE(message.find("(install an OpenCL driver or set EDGELM_OPENCL_LIB)"), std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(ClLoader, GemmChoiceByName) {
  EXPECT_EQ(opencl::parse_cl_gemm("own"), opencl::ClGemm::Own);
  EXPECT_EQ(opencl::parse_cl_gemm("clblast"), opencl::ClGemm::Clblast);
  EXPECT_EQ(opencl::parse_cl_gemm("auto"), opencl::ClGemm::Auto);
  try {
    opencl::parse_cl_gemm("cublas");
    FAIL() << "no error for an unknown GEMM";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "[opencl] EDGELM_CL_GEMM='cublas': use auto, clblast or own");
  }
}

// The ICD loader, found by its soname after a candidate that does not exist; every entry of the
// table resolved and callable.
TEST(ClLoader, OpensTheIcdLoader) {
  const std::vector<std::string> candidates = {"/nonexistent/libOpenCL.so", "libOpenCL.so.1"};
  opencl::ClLibrary library;
  try {
    library = load_opencl_library(candidates, false);
  } catch (const Error& error) {
    if (std::getenv("EDGELM_REQUIRE_OPENCL") != nullptr) FAIL() << error.what();
    GTEST_SKIP() << error.what();
  }
  EXPECT_EQ(library.path, "libOpenCL.so.1");
  EXPECT_NE(library.api.clGetPlatformIDs, nullptr);
  EXPECT_NE(library.api.clEnqueueNDRangeKernel, nullptr);
  EXPECT_NE(library.api.clReleaseEvent, nullptr);
  cl_uint platforms = 0;
  EXPECT_NO_FATAL_FAILURE(library.api.clGetPlatformIDs(0, nullptr, &platforms));
}

}  // namespace
}  // namespace edgelm
