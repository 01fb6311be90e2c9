#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Our module into the UCX that NIXL's pip wheel brings (`pip install nixl`: nixl-cu12 or nixl-cu13). That UCX sits
# renamed in site-packages (auditwheel: nixl_cu13.libs/libucs-HASH.so.0.0.0 and the rest, UCX's modules in its
# ucx/ directory), with no headers and no ucx_info (docs/install.md, "NIXL from pip").
#
#   contrib/nixl-pip-module.sh [--python PYTHON | --libs DIR] MODULE [DEST]   put MODULE where that UCX loads it
#   contrib/nixl-pip-module.sh [--python PYTHON | --libs DIR] --check         which libuct_cuda that UCX loads
#
# MODULE is a libuct_cuda.so.0 built against the source of the wheel's UCX release (this script says which; the
# headers of a UCX of the same release, built without CUDA, serve for --with-ucx). It is copied with its UCX
# libraries renamed to the wheel's (patchelf: NIXL has loaded those already, and a second UCX in one process
# must not be) and named as that UCX names its modules (the extension of its libucs: .so.0.0.0). On UCX 1.22 and
# later it goes into DEST (default: DIR/ucx-cuda) and UCX_PLUGIN_PATH=DEST takes it instead of the wheel's own,
# which stays untouched; before 1.22 (no plugin path) it replaces the wheel's own, kept as NAME.wheel. The line to
# export, if any, is printed last. --check lists the components that UCX registers and the libuct_cuda it
# loaded, under the current environment (UCX_PLUGIN_PATH included). PYTHON: the interpreter NIXL is installed
# for (default python3); DIR: the wheel's libraries directory, where no interpreter can find it.
set -euo pipefail
python=python3 libs= check=0
while [ $# -gt 0 ]; do
    case $1 in
    --python) python=$2; shift 2 ;;
    --libs) libs=$(cd "$2" && pwd); shift 2 ;;
    --check) check=1; shift ;;
    -h | --help) sed -n '3,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
fail() { echo "nixl-pip-module: $*" >&2; exit 1; }

if [ -z "$libs" ]; then
    libs=$("$python" - <<'PY'
import glob, os, sys
for path in sys.path:
    for d in sorted(glob.glob(os.path.join(path or ".", "nixl*.libs"))):
        if glob.glob(os.path.join(d, "libucs-*.so*")):
            print(os.path.abspath(d))
            sys.exit(0)
sys.exit(1)
PY
) || fail "no NIXL wheel with a UCX of its own for $python (pip install nixl), or name its libraries with --libs"
fi
lib_of() { find "$libs" -maxdepth 1 -name "$1-*.so*" | sort | head -n 1; }
ucs=$(lib_of libucs) ucp=$(lib_of libucp)
[ -n "$ucs" ] && [ -n "$ucp" ] && [ -n "$(lib_of libuct)" ] || fail "$libs has no libucs-*, libuct-* and libucp-*"
ext=$(basename "$ucs")
ext=.${ext#*.}
version=$("$python" -c '
import ctypes, sys
v = [ctypes.c_uint() for _ in range(3)]
ctypes.CDLL(sys.argv[1]).ucp_get_version(*[ctypes.byref(x) for x in v])
print("%d.%d.%d" % tuple(x.value for x in v))' "$ucp") || fail "cannot ask $ucp its version"
major=${version%%.*} minor=${version#*.}
minor=${minor%%.*}

if [ "$check" = 1 ]; then
    echo "NIXL's UCX $version: $libs"
    exec "$python" - "$ucp" "$(lib_of libuct)" <<'PY'
import ctypes, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
uct = ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
class attr(ctypes.Structure): # uct_component_attr_t: field_mask, name[16], md_resource_count, md_resources, flags
    _fields_ = [("field_mask", ctypes.c_uint64), ("name", ctypes.c_char * 16), ("count", ctypes.c_uint),
                ("resources", ctypes.c_void_p), ("flags", ctypes.c_uint64)]
comps, n = ctypes.POINTER(ctypes.c_void_p)(), ctypes.c_uint()
if uct.uct_query_components(ctypes.byref(comps), ctypes.byref(n)) != 0:
    sys.exit("uct_query_components failed")
names = []
for i in range(n.value):
    a = attr(field_mask=1) # UCT_COMPONENT_ATTR_FIELD_NAME
    if uct.uct_component_query(ctypes.c_void_p(comps[i]), ctypes.byref(a)) == 0:
        names.append(a.name.decode())
print("components:", " ".join(names))
maps = {l.split()[-1] for l in open("/proc/self/maps") if "/" in l}
loaded = sorted(m for m in maps if "libuct_cuda" in m)
print("libuct_cuda loaded:", " ".join(loaded) if loaded else "none")
print("UCX libraries loaded:", " ".join(sorted(m for m in maps if "/libuc" in m and "/ucx" not in m[:m.rfind("/")])))
sys.exit(0 if {"cuda_cpy", "cuda_ipc"} <= set(names) else 1)
PY
fi

module=${1:?usage: contrib/nixl-pip-module.sh [--python PYTHON | --libs DIR] MODULE [DEST] (or --check)}
[ -f "$module" ] || fail "no module $module"
command -v patchelf >/dev/null 2>&1 || fail "needs patchelf (apt-get install patchelf, or pip install patchelf)"
built=$(strings -a "$module" | sed -n 's/^uct-cuda-plugin built for UCX \([0-9]*\)_\([0-9]*\)$/\1.\2/p' | head -n 1)
[ -n "$built" ] || fail "$module says no UCX release (a uct-cuda-plugin module of this tree's age or later?)"
[ "$built" = "$major.$minor" ] || fail "$module is built for UCX $built; NIXL's UCX is $version: configure" \
    "--with-ucx-src= a UCX $major.$minor source tree (its release tag) and --with-ucx= a UCX $major.$minor install"

work=$(mktemp)
trap 'rm -f "$work"' EXIT
cp "$module" "$work"
for name in libucs libuct libucm libucp; do
    f=$(lib_of "$name")
    [ -z "$f" ] || patchelf --replace-needed "$name.so.0" "$(basename "$f")" "$work"
done
patchelf --set-rpath '$ORIGIN/..' "$work" # DEST and ucx/ are both directories inside the wheel's libraries
chmod 755 "$work"
if [ "$major" -gt 1 ] || [ "$minor" -ge 22 ]; then
    dest=${2:-$libs/ucx-cuda}
    mkdir -p "$dest"
    [ "$(cd "$dest/.." && pwd)" = "$libs" ] || patchelf --set-rpath "$libs" "$work"
    cp "$work" "$dest/libuct_cuda$ext"
    echo "installed $dest/libuct_cuda$ext for NIXL's UCX $version; in every NIXL process's environment:"
    echo "export UCX_PLUGIN_PATH=$dest"
else
    target=$libs/ucx/libuct_cuda$ext
    [ -e "$target.wheel" ] || [ ! -e "$target" ] || cp -p "$target" "$target.wheel"
    cp "$work" "$target"
    echo "installed $target for NIXL's UCX $version (the wheel's own kept as $target.wheel;" \
        "pip install --force-reinstall puts it back)"
fi
