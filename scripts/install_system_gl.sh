#!/bin/sh
# OpenGL for MuJoCo's offscreen renderer (image observations of the Playground DMC tasks,
# episode videos): Mesa's OSMesa, a software rasteriser that needs no display and no GPU.
# Run by `make install`. Quiet when libOSMesa is already there; where it cannot install
# (not root, no apt-get) it prints one line naming the package and lets the install go on.
if { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -q 'libOSMesa\.so'; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing libosmesa6 (OpenGL for MuJoCo's renderer: env.obs=image, --video)"
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -q libosmesa6 >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libosmesa6 >/dev/null 2>&1; }; then
        exit 0
    fi
fi
echo "note: no libOSMesa; MuJoCo image observations and videos need it (Debian/Ubuntu: apt-get install libosmesa6), or MUJOCO_GL=egl with libEGL"
exit 0
