#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Generates configure and Makefile.in. Needs autoconf, automake and libtool (libtoolize).
set -e
cd "$(dirname "$0")"
mkdir -p config
autoreconf -fi
