#!/bin/sh
# Generates configure and Makefile.in. Needs autoconf, automake and libtool (libtoolize).
set -e
cd "$(dirname "$0")"
mkdir -p config
autoreconf -fi
