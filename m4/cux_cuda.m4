dnl SPDX-License-Identifier: BSD-3-Clause
# CUX_CHECK_CUDA: a CUDA toolkit, which the module does not need. The driver is opened at run time and its API
# declared in src/driver/cux_cuda.h; a toolkit, where one is found, serves tests alone: its headers check that
# declaration (test/abi/), and its static runtime builds one test program. Without one, those are left out, and
# configure says so.
AC_DEFUN([CUX_CHECK_CUDA], [
AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [a CUDA toolkit for tests only (default: /usr/local/cuda where present); the module needs none])],
    [], [with_cuda=check])
cux_cuda_dir=$with_cuda
AS_IF([test "$with_cuda" = check], [cux_cuda_dir=/usr/local/cuda])
CUDA_TOOLKIT_CPPFLAGS=
cux_cuda_version=0
AS_IF([test "$with_cuda" != no && test -f "$cux_cuda_dir/include/cuda.h"], [
    AC_MSG_CHECKING([CUDA toolkit headers in $cux_cuda_dir])
    cux_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="-I$cux_cuda_dir/include $CPPFLAGS"
    AC_COMPUTE_INT([cux_cuda_version], [CUDA_VERSION], [#include <cuda.h>], [cux_cuda_version=0])
    CPPFLAGS=$cux_save_CPPFLAGS
    AC_MSG_RESULT([$cux_cuda_version])
])
dnl the declarations follow CUDA 13.0's API; an older toolkit's headers lack some of it
AS_IF([test "$cux_cuda_version" -ge 13000],
      [CUDA_TOOLKIT_CPPFLAGS="-I$cux_cuda_dir/include"],
      [test "$with_cuda" != check && test "$with_cuda" != no],
      [AC_MSG_ERROR([--with-cuda=$with_cuda: no CUDA 13.0 or later toolkit there (found ${cux_cuda_version}); the module needs none: leave the option out])],
      [AC_MSG_NOTICE([no CUDA 13 toolkit (none needed to build the module): the check of src/driver/cux_cuda.h against the toolkit's headers and the static-runtime test program are left out])])
AC_SUBST([CUDA_TOOLKIT_CPPFLAGS])
AM_CONDITIONAL([HAVE_CUDA_TOOLKIT], [test -n "$CUDA_TOOLKIT_CPPFLAGS"])
# Only for a test program (a CUDA runtime linked statically, which allocation hooks cannot see).
CUDART_STATIC=
AS_IF([test -n "$CUDA_TOOLKIT_CPPFLAGS"], [
    AC_MSG_CHECKING([for the static CUDA runtime])
    for cux_dir in "$cux_cuda_dir/lib64" "$cux_cuda_dir/lib"; do
        AS_IF([test -z "$CUDART_STATIC" && test -f "$cux_dir/libcudart_static.a"],
              [CUDART_STATIC="$cux_dir/libcudart_static.a"])
    done
    AC_MSG_RESULT([${CUDART_STATIC:-no}])
])
AC_SUBST([CUDART_STATIC])
AM_CONDITIONAL([HAVE_CUDART_STATIC], [test -n "$CUDART_STATIC"])
AS_IF([test -n "$CUDA_TOOLKIT_CPPFLAGS"], [cux_cuda_summary="$cux_cuda_dir (CUDA $cux_cuda_version), for tests"],
      [cux_cuda_summary="none (not needed: src/driver/cux_cuda.h)"])
])
