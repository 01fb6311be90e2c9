dnl SPDX-License-Identifier: BSD-3-Clause
# CUX_CHECK_UCX: find the installed UCX, the source tree of the same version (UCT's internal headers are not
# installed), check that both versions match, reproduce the installed UCX's build defines (they change struct
# layouts) and derive the module directory the installed UCX searches.
AC_DEFUN([CUX_CHECK_UCX], [
AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx=PREFIX], [installed UCX (default: /usr)])],
    [], [with_ucx=/usr])
AC_ARG_WITH([ucx-src],
    [AS_HELP_STRING([--with-ucx-src=DIR],
                    [UCX source tree of the same version as the installed UCX (required)])],
    [], [with_ucx_src=no])
AC_ARG_WITH([ucx-moduledir],
    [AS_HELP_STRING([--with-ucx-moduledir=DIR],
                    [where to install libuct_cuda.so.0 (default: the installed UCX's module directory)])],
    [], [with_ucx_moduledir=default])

AS_IF([test "x$with_ucx_src" = xno || test -z "$with_ucx_src"],
      [AC_MSG_ERROR([--with-ucx-src=DIR is required: UCX installs no uct/base/*.h headers. Run contrib/install-deps.sh to fetch the source of the installed version.])])
AS_IF([test ! -f "$with_ucx_src/src/uct/base/uct_md.h"],
      [AC_MSG_ERROR([--with-ucx-src=$with_ucx_src is not a UCX source tree (no src/uct/base/uct_md.h)])])
with_ucx_src=`cd "$with_ucx_src" && pwd`

# libdir: where libucs.so.0 is.
cux_ucx_libdir=
for d in "$with_ucx/lib" "$with_ucx/lib64" "$with_ucx"/lib/*-linux-gnu*; do
    AS_IF([test -z "$cux_ucx_libdir" && test -e "$d/libucs.so.0"], [cux_ucx_libdir=$d])
done
AS_IF([test -z "$cux_ucx_libdir"], [AC_MSG_ERROR([no libucs.so.0 under $with_ucx/lib*])])
cux_ucx_run="env LD_LIBRARY_PATH=$cux_ucx_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} UCX_MODULES=^cuda"

# ucx_info (package ucx-utils) gives the version and the build defines. A UCX installed without it, such as
# Ubuntu's libucx0 alone, needs --with-ucx-build-config (cux_ucx_build_config.m4).
AC_MSG_CHECKING([for ucx_info of the installed UCX])
cux_ucx_info="$with_ucx/bin/ucx_info"
AS_IF([test -x "$cux_ucx_info"], [AC_MSG_RESULT([$cux_ucx_info])],
      [AC_MSG_RESULT([no])
       cux_ucx_info=])
AC_SUBST([UCX_INFO], [$cux_ucx_info])

AC_MSG_CHECKING([installed UCX version])
AS_IF([test -n "$cux_ucx_info"],
      [# "# Version 1.13.1" up to 1.14, "# Library version: 1.16.0" since
       cux_ucx_version=`$cux_ucx_run "$cux_ucx_info" -v 2>/dev/null | \
           sed -n 's/^# \(Library version:\|Version\) \(@<:@0-9.@:>@*\).*/\2/p' | head -n 1`
       AS_IF([test -z "$cux_ucx_version"], [AC_MSG_ERROR([could not run $cux_ucx_info -v])])],
      [CUX_UCX_LIBRARY_VERSION([$cux_ucx_libdir])])
AC_MSG_RESULT([$cux_ucx_version])

AC_MSG_CHECKING([UCX source tree version])
for cux_part in major minor patch; do
    cux_val=`sed -n "s/.*ucx_ver_$cux_part@<:@^0-9@:>@*\(@<:@0-9@:>@*\).*/\1/p" "$with_ucx_src/configure.ac" | head -n 1`
    eval cux_src_$cux_part=\$cux_val
done
cux_src_version="$cux_src_major.$cux_src_minor.$cux_src_patch"
AC_MSG_RESULT([$cux_src_version])
AS_IF([test "x$cux_src_version" != "x$cux_ucx_version"],
      [AC_MSG_ERROR([UCX source tree $with_ucx_src is version $cux_src_version but the installed UCX ($with_ucx) is $cux_ucx_version: internal structures differ between versions, use the source of exactly the installed version])])

cux_ucx_major=`echo $cux_ucx_version | cut -d. -f1`
cux_ucx_minor=`echo $cux_ucx_version | cut -d. -f2`
# One header per release in src/compat/ (cux_ucx_compat.h says how to add one): the headers there are the list
# of supported releases.
cux_ucx_supported=`ls "$srcdir"/src/compat/cux_ucx_*_*.h 2>/dev/null | sed 's/.*cux_ucx_\(@<:@0-9@:>@*\)_\(@<:@0-9@:>@*\)\.h$/\1.\2/' | sort -t. -k1,1n -k2,2n | tr '\n' ' '`
AS_IF([test -f "$srcdir/src/compat/cux_ucx_${cux_ucx_major}_${cux_ucx_minor}.h"], [],
      [AC_MSG_ERROR([UCX $cux_ucx_version is not supported yet (supported: $cux_ucx_supported)])])
AC_MSG_NOTICE([supported UCX releases: $cux_ucx_supported])
AC_SUBST([CUX_UCX_VERNUM], [`expr $cux_ucx_major \* 100 + $cux_ucx_minor`])
AC_SUBST([CUX_UCX_RELEASE], [${cux_ucx_major}_${cux_ucx_minor}])
# What the launcher needs of the release, read from its header (the rule lives there, for C and shell alike)
AC_COMPUTE_INT([CUX_UCX_LOADS_PLUGIN_PATH], [CUX_UCX_LOADS_PLUGIN_PATH],
               [[#include "$srcdir/src/compat/cux_ucx_${cux_ucx_major}_${cux_ucx_minor}.h"]],
               [AC_MSG_ERROR([cannot read CUX_UCX_LOADS_PLUGIN_PATH from cux_ucx_${cux_ucx_major}_${cux_ucx_minor}.h])])
AC_SUBST([CUX_UCX_LOADS_PLUGIN_PATH])

mkdir -p ucx-build
CUX_UCX_BUILD_CONFIG([ucx-build/config.h])
AS_IF([grep -q '^#define ENABLE_STATS' ucx-build/config.h],
      [AC_MSG_NOTICE([installed UCX has statistics enabled (ENABLE_STATS)])])
CUX_UCX_GENERATED_HEADERS([ucx-build])

# Linked by the libraries' run-time names: a UCX installed without its development package has no
# libuct.so links, and the module must bind to exactly the libraries it was built against anyway.
mkdir -p ucx-build/lib
for cux_lib in ucs uct ucp; do
    AS_IF([test -e "$cux_ucx_libdir/lib$cux_lib.so.0"], [],
          [AC_MSG_ERROR([no lib$cux_lib.so.0 in $cux_ucx_libdir])])
    ln -sf "$cux_ucx_libdir/lib$cux_lib.so.0" "ucx-build/lib/lib$cux_lib.so"
done

UCX_CPPFLAGS="-include \$(abs_top_builddir)/ucx-build/config.h -I\$(abs_top_builddir)/ucx-build -DHAVE_CONFIG_H -I$with_ucx_src/src -I$with_ucx/include"
# A run path only where the dynamic linker would not find these very libraries by itself (a UCX in a prefix of its
# own): one to a directory it searches anyway is what Debian's lintian calls custom-library-search-path.
cux_ucx_rpath="-Wl,-rpath,$cux_ucx_libdir"
cux_ucx_found=$(/sbin/ldconfig -p 2>/dev/null | sed -n 's/^.*libucs\.so\.0 (.*) => //p' | head -n 1)
AS_IF([test -n "$cux_ucx_found" &&
       test "$(readlink -f "$cux_ucx_found")" = "$(readlink -f "$cux_ucx_libdir/libucs.so.0")"], [cux_ucx_rpath=])
UCX_LDFLAGS="-L\$(abs_top_builddir)/ucx-build/lib $cux_ucx_rpath"
UCX_LIBS="-luct -lucs"
AC_SUBST([UCX_CPPFLAGS])
AC_SUBST([UCX_LDFLAGS])
AC_SUBST([UCX_LIBS])
AC_SUBST([UCX_LIBDIR], [$cux_ucx_libdir])
AC_SUBST([UCX_PREFIX], [$with_ucx])
AC_SUBST([UCX_SRC], [$with_ucx_src])
AC_SUBST([UCX_VERSION], [$cux_ucx_version])

# Test the headers once, as the module will use them.
cux_save_CPPFLAGS=$CPPFLAGS
CPPFLAGS="-include `pwd`/ucx-build/config.h -I`pwd`/ucx-build -DHAVE_CONFIG_H -I$with_ucx_src/src -I$with_ucx/include $CPPFLAGS"
AC_CHECK_HEADER([uct/base/uct_iface.h], [],
                [AC_MSG_ERROR([UCT's internal headers do not compile with the installed UCX's defines])])
CPPFLAGS=$cux_save_CPPFLAGS

AS_IF([test "x$with_ucx_moduledir" = xdefault],
      [cux_moduledir="$cux_ucx_libdir/ucx"],
      [cux_moduledir="$with_ucx_moduledir"])
AC_SUBST([moduledir], [$cux_moduledir])

# UCX's device API (1.21+): kernels include <uct/cuda/cuda_ipc/cuda_ipc.cuh>, which only a UCX built with CUDA
# installs. Where the installed UCX has the device API's headers but not that one, ours goes there (a UCX
# built with CUDA keeps its own: the host side is ours either way).
AC_ARG_WITH([ucx-device-includedir],
            [AS_HELP_STRING([--with-ucx-device-includedir=DIR],
                            [where cuda_ipc's device header goes (default: UCX's include/uct/cuda/cuda_ipc when the
                             installed UCX has the device API and no such header; "no": nowhere)])],
            [], [with_ucx_device_includedir=default])
cux_device_includedir=
AS_IF([test "x$with_ucx_device_includedir" = xno], [],
      [test "x$with_ucx_device_includedir" != xdefault], [cux_device_includedir=$with_ucx_device_includedir],
      [test "$CUX_UCX_VERNUM" -ge 121 && test -f "$with_ucx/include/uct/api/device/uct_device_impl.h" &&
       test ! -f "$with_ucx/include/uct/cuda/cuda_ipc/cuda_ipc.cuh"],
      [cux_device_includedir="$with_ucx/include/uct/cuda/cuda_ipc"])
AC_SUBST([cudaipcdir], [$cux_device_includedir])
AM_CONDITIONAL([CUX_INSTALL_DEVICE_HEADER], [test -n "$cux_device_includedir"])
AC_MSG_NOTICE([cuda_ipc device header: ${cux_device_includedir:-not installed}])
])
