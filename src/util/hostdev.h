/* hostdev.h: SD_HD_FN, the qualifier of a small function written once for the C engine and the
 * CUDA kernels: static inline in C; __host__ __device__ (and inlined) when nvcc compiles it, so a
 * kernel and the CPU run the same statements. */
#ifndef SD_HOSTDEV_H
#define SD_HOSTDEV_H
#ifdef __CUDACC__
#define SD_HD_FN static __host__ __device__ __forceinline__
#else
#define SD_HD_FN static inline
#endif
#endif
