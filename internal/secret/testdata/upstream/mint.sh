#!/bin/sh
# Regenerate vectors.json with the real flechtctl 0.17.0. Needs a Python
# with flechtctl==0.17.0 installed: FLECHT_UPSTREAM_PYTHON names it (for the
# project's Debian chroot, a wrapper such as
#   exec chroot /work/upstream/chroot /opt/fw/bin/python "$@"
# ). The script goes in on standard input, so no path is shared.
set -eu
cd "$(dirname "$0")"
"${FLECHT_UPSTREAM_PYTHON:?name a python with flechtctl 0.17.0 installed}" - < mint.py > vectors.json.new
mv vectors.json.new vectors.json
