/*
 * Release builds only (scripts/release.ts passes `-include src/glibc-floor.h`): bind the few functions whose
 * default symbol version moved to GLIBC_2.34 (when libpthread merged into libc) to their original versions, so the
 * addon needs no newer glibc than the Bun runtime it is embedded in (GLIBC_2.17). glibc 2.34 and later still export
 * these versions; older ones export them from libpthread.so.0, which the release links explicitly.
 * The release measures every executable's symbol versions (objdump -T) and states the floor in its SBOM.
 */
#if defined(__x86_64__)
#define CNIKIT_GLIBC_BASE "GLIBC_2.2.5"
#define CNIKIT_GLIBC_CONDATTR "GLIBC_2.3.3"
#elif defined(__aarch64__)
#define CNIKIT_GLIBC_BASE "GLIBC_2.17"
#define CNIKIT_GLIBC_CONDATTR "GLIBC_2.17"
#endif
#ifdef CNIKIT_GLIBC_BASE
__asm__(".symver pthread_create,pthread_create@" CNIKIT_GLIBC_BASE);
__asm__(".symver pthread_attr_setstacksize,pthread_attr_setstacksize@" CNIKIT_GLIBC_BASE);
__asm__(".symver pthread_condattr_setclock,pthread_condattr_setclock@" CNIKIT_GLIBC_CONDATTR);
#endif
