// CLBlast's C API (clblast_c.h), opened at run time like OpenCL itself (cl_loader.cpp). Only the
// files that call it see this header and EDGELM_HAVE_CLBLAST, which the build defines for them
// when it found the header; the rest of the backend does not depend on CLBlast.
#pragma once

#if EDGELM_HAVE_CLBLAST
#include <clblast_c.h>

#include "backends/opencl/cl_loader.h"

namespace edgelm::opencl {

// The CLBlast entry points of the GEMM path.
struct ClblastApi {
  decltype(&::CLBlastSgemmWithTempBuffer) sgemm_with_temp_buffer = nullptr;
  decltype(&::CLBlastSGemmTempBufferSize) sgemm_temp_buffer_size = nullptr;
};

// CLBlast (libclblast.so.1, then libclblast.so), opened at the first call after cl(); null when
// the OpenCL library or CLBlast does not load (clblast_unavailable_reason() says why; the backend
// then multiplies with its own GEMM kernel). Never throws. CLBlast reaches OpenCL through the
// libOpenCL.so.1 the dynamic linker finds for it, so with EDGELM_OPENCL_LIB naming another library
// it may not load.
const ClblastApi* clblast();

}  // namespace edgelm::opencl
#endif
