# CMake toolchain file: the CPU addon for linux-arm64 (glibc), cross-compiled from x86-64 Linux.
# CMakeLists.txt compiles the arm64 kernel variants (scalar, neon) when CMAKE_SYSTEM_PROCESSOR is
# aarch64. The compiler is Debian's g++-aarch64-linux-gnu unless CMAKE_CXX_COMPILER says otherwise
# (e.g. a wrapper running `zig c++ -target aarch64-linux-gnu.2.28`). Node's and node-addon-api's
# headers are the same for every target, and an N-API addon links against no Node library (its
# napi_* symbols are resolved when Node loads it), so nothing else of the target is needed.
# Used by scripts/cross/linux-arm64.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
if(NOT CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
endif()
# Libraries and headers of the target come from the compiler's own sysroot; programs from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
