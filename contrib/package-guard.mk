# SPDX-License-Identifier: BSD-3-Clause
# make install and make uninstall beside the Debian package (contrib/build-deb.sh), read by make alone (Makefile.am
# includes it with -include, which automake leaves to make). The package's module in UCX's module directory is
# dpkg's; a module installed by hand there before the package is kept aside as NAME.by-hand while the package is
# installed (debian/uct-cuda-plugin.preinst.in, dpkg-divert), and put back when it is removed.
# - make install refuses while a package owns that path: it would overwrite the package's file (dpkg -V: changed).
# - make uninstall leaves the package's module where it is and removes what this build installed: the module set
#   aside (the package's removal then puts nothing back), its .la and .so link, and the rest as usual.
# Installs into a staging directory (DESTDIR: the package's own build) are not guarded.
cux_guarded_goals := $(filter install install-exec install-am install-exec-am uninstall uninstall-am,$(MAKECMDGOALS))
ifneq ($(cux_guarded_goals),)
ifeq ($(DESTDIR),)
cux_module := $(moduledir)/libuct_cuda.so.0
# "PACKAGE: PATH" (or "PACKAGE:ARCH: PATH"); dpkg's diversion lines have spaces before their colon
cux_owner = $(shell dpkg-query -S '$(1)' 2>/dev/null | \
                    sed -n 's/^\([^ :]*\)\(:[a-z0-9_]*\)\{0,1\}: .*/\1/p' | head -n 1)
cux_module_owner := $(call cux_owner,$(cux_module))
ifneq ($(cux_module_owner),)
ifneq ($(filter install%,$(cux_guarded_goals)),)
$(error $(cux_module) is the package $(cux_module_owner)'s module: make install would overwrite it. \
Remove the package first (apt remove $(cux_module_owner)) or keep the package alone)
endif
# uninstall: libtool would remove the files the .la names, which are the package's now
module_LTLIBRARIES :=
uninstall-am: cux-uninstall-beside-package
cux-uninstall-beside-package:
	@echo "make uninstall: $(cux_module) is the package $(cux_module_owner)'s module: left in place"
	@for f in '$(cux_module)' '$(cux_module).0.0'; do \
	    if [ "$$(dpkg-divert --listpackage "$$f")" = '$(cux_module_owner)' ] && [ -e "$$f.by-hand" ]; then \
	        echo "make uninstall: removing $$f.by-hand, this install's module that the package set aside"; \
	        rm -f "$$f.by-hand" || exit 1; \
	    fi; \
	done
	@for f in '$(moduledir)/libuct_cuda.so' '$(moduledir)/libuct_cuda.la'; do \
	    if { [ -e "$$f" ] || [ -L "$$f" ]; } && ! dpkg-query -S "$$f" >/dev/null 2>&1; then \
	        echo "make uninstall: removing $$f"; rm -f "$$f" || exit 1; \
	    fi; \
	done
endif
endif
endif
