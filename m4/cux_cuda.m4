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
])
