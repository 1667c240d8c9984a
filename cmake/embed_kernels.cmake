# Turns the OpenCL C sources given in KERNEL_FILES (a ;-list) into one C++ file, OUTPUT, that
# defines edgelm::opencl::kernel_sources(): each family's name (the file name without .cl) and its
# text. Run by a custom command at build time, so editing a .cl file rebuilds the binary.
set(body "")
foreach(path IN LISTS KERNEL_FILES)
  get_filename_component(family "${path}" NAME_WE)
  file(READ "${path}" text)
  string(FIND "${text}" ")edgelm_cl\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains the raw-string delimiter )edgelm_cl\"")
  endif()
  string(APPEND body "    {\"${family}\", R\"edgelm_cl(${text})edgelm_cl\"},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp"
"// Generated from kernels/*.cl by cmake/embed_kernels.cmake; do not edit.
#include \"backends/opencl/kernel_sources.h\"

namespace edgelm::opencl {

std::span<const KernelSource> kernel_sources() {
  static const KernelSource sources[] = {
${body}  };
  return sources;
}

}  // namespace edgelm::opencl
")
# Only touch the output when it changed, so an unrelated reconfigure does not rebuild it.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
