/* glibc.h -- bind the shim's references to libdl's functions to their oldest symbol versions.
 *
 * glibc 2.34 moved dlopen, dlsym, dlvsym, dladdr and dlerror from libdl into libc under a new version (GLIBC_2.34),
 * keeping the old ones for compatibility. A library linked on a new glibc without this would need GLIBC_2.34 and fail
 * to load in images built on older ones (Ubuntu 20.04: 2.31, UBI 8: 2.28), which is where the shim must run. Every
 * translation unit that calls one of these includes this header. tests/unit/test_shim.c checks the built library
 * needs nothing newer than GLIBC_2.17.
 */
#ifndef SHIM_GLIBC_H
#define SHIM_GLIBC_H

#if defined(__x86_64__)
#define SHIM_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define SHIM_GLIBC_BASE "GLIBC_2.17"
#else
#error "libtessera-cuda.so is built for x86_64 and aarch64 (its dlsym trampoline, shim/dlsym.S, is assembly)"
#endif

__asm__(".symver dlopen,dlopen@" SHIM_GLIBC_BASE);
__asm__(".symver dlvsym,dlvsym@" SHIM_GLIBC_BASE);
__asm__(".symver dladdr,dladdr@" SHIM_GLIBC_BASE);
__asm__(".symver dlerror,dlerror@" SHIM_GLIBC_BASE);

#endif
