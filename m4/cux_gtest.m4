dnl SPDX-License-Identifier: BSD-3-Clause
# CUX_CHECK_GTEST: googletest for `make check` (Debian's libgtest-dev ships libgtest.a and the headers), and an
# MPI compiler for the MPI test.
AC_DEFUN([CUX_CHECK_GTEST], [
AC_LANG_PUSH([C++])
cux_save_LIBS=$LIBS
LIBS="-lgtest -pthread $LIBS"
AC_MSG_CHECKING([for googletest])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gtest/gtest.h>]],
                                [[testing::InitGoogleTest(); return RUN_ALL_TESTS();]])],
               [cux_have_gtest=yes], [cux_have_gtest=no])
AC_MSG_RESULT([$cux_have_gtest])
LIBS=$cux_save_LIBS
AC_LANG_POP([C++])
AM_CONDITIONAL([HAVE_GTEST], [test "x$cux_have_gtest" = xyes])

# An MPI compiler for test/cux_mpi_datacheck (Debian's libopenmpi-dev); the MPI test is skipped without one.
AC_PATH_PROG([MPICC], [mpicc])
AM_CONDITIONAL([HAVE_MPICC], [test -n "$MPICC"])
])
