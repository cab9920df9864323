#!/bin/sh
# Unpacks tools/gpu-bundle.sh's archive on a lent GPU machine (as root) and
# prints the environment to source: the binaries look for their data at the
# paths compiled into them (/work/main/..., /work/shared/data), so those are
# made to point at the unpacked folders and at this checkout.
# Usage: eval "$(tools/gpu-unpack.sh .dev/bundle.tar.xz)"
set -eu
bundle=$1
here=$(pwd)
dest=/tmp/rlxb
mkdir -p "$dest" /work
xz -dc "$bundle" | tar -C "$dest" -xf -
[ -e /work/main ] || ln -s "$here" /work/main
[ -e /work/main/build-release ] || ln -s "$dest/build-release" /work/main/build-release
mkdir -p /work/shared
[ -e /work/shared/data ] || ln -s "$dest/data" /work/shared/data
# the machine's own C++ runtime when it has one (newer than Debian 12's)
for l in libstdc++.so.6 libgcc_s.so.1 libz.so.1; do
    ldconfig -p | grep -q "$l" && rm -f "$dest/lib/$l"
done
# cuBLAS: the toolkit's or the Python wheel's
cublas=$(find /usr/local /usr/lib /opt -name 'libcublas.so.1[0-9]*' 2>/dev/null | head -1)
extra=""
[ -n "$cublas" ] && extra=":$(dirname "$cublas")"
echo "export LD_LIBRARY_PATH=$dest/lib$extra"
icd=$(find /usr/local/nvidia /usr/share/vulkan /etc/vulkan -name 'nvidia_icd*.json' 2>/dev/null | head -1)
[ -n "$icd" ] && echo "export VK_DRIVER_FILES=$icd"
echo "export RLX_BUILD=/work/main/build-release"
