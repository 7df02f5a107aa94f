# Cross-compiling tern for ARM64 Linux with Debian's g++-aarch64-linux-gnu; test binaries run under
# qemu-user (ctest and gtest discovery use CMAKE_CROSSCOMPILING_EMULATOR). Libraries come from
# Debian's arm64 multiarch packages (libpcre2-dev:arm64, libgtest-dev:arm64, libstdc++6:arm64);
# header-only packages (nlohmann-json, CLI11) from the host. scripts/test_arm64.sh uses this file.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The run-time libraries are Debian's arm64 multiarch packages (libc6:arm64, libstdc++6:arm64), so
# qemu takes / as the sysroot: with the cross toolchain's own glibc (-L /usr/aarch64-linux-gnu),
# dynamically linked programs hang in their first pthread_create under Debian 12's qemu 7.2.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
