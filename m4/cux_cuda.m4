dnl SPDX-License-Identifier: BSD-3-Clause
# CUX_CHECK_CUDA: CUDA driver API headers only. The driver itself is loaded at run time.
AC_DEFUN([CUX_CHECK_CUDA], [
AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit with include/cuda.h (default: /usr/local/cuda)])],
    [], [with_cuda=/usr/local/cuda])
CUDA_CPPFLAGS="-I$with_cuda/include"
cux_save_CPPFLAGS=$CPPFLAGS
CPPFLAGS="$CUDA_CPPFLAGS $CPPFLAGS"
AC_CHECK_HEADER([cuda.h], [], [AC_MSG_ERROR([cuda.h not found under $with_cuda/include: pass --with-cuda=DIR])])
AC_MSG_CHECKING([CUDA header version])
AC_COMPUTE_INT([cux_cuda_version], [CUDA_VERSION], [#include <cuda.h>], [cux_cuda_version=0])
AC_MSG_RESULT([$cux_cuda_version])
AS_IF([test "$cux_cuda_version" -lt 12000],
      [AC_MSG_ERROR([CUDA >= 12.0 headers are required (found $cux_cuda_version)])])
CPPFLAGS=$cux_save_CPPFLAGS
AC_SUBST([CUDA_CPPFLAGS])
# Only for a test program (a CUDA runtime linked statically, which allocation hooks cannot see).
AC_MSG_CHECKING([for the static CUDA runtime])
CUDART_STATIC=
for cux_dir in "$with_cuda/lib64" "$with_cuda/lib"; do
    AS_IF([test -z "$CUDART_STATIC" && test -f "$cux_dir/libcudart_static.a"],
          [CUDART_STATIC="$cux_dir/libcudart_static.a"])
done
AC_MSG_RESULT([${CUDART_STATIC:-no}])
AC_SUBST([CUDART_STATIC])
AM_CONDITIONAL([HAVE_CUDART_STATIC], [test -n "$CUDART_STATIC"])
])
