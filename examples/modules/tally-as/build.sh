#!/usr/bin/env bash
# Builds the tally-as module: build.sh OUT.wasm
# Installs the pinned AssemblyScript compiler into node_modules/ when it is
# not there yet, then compiles the optimised release build to OUT.wasm.
set -euo pipefail

if [ "$#" -ne 1 ]; then
	echo "usage: $0 OUT.wasm" >&2
	exit 2
fi

# OUT is taken relative to where the script was called from; everything
# else relative to the script's own directory, so it works from anywhere.
out=$1
case $out in
/*) ;;
*) out=$PWD/$out ;;
esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

want=$(node -p 'require("./package.json").devDependencies.assemblyscript')
have=$(node -p 'try { require("./node_modules/assemblyscript/package.json").version } catch { "" }')
if [ "$have" != "$want" ]; then
	# No lock file: package.json pins the one version, exactly.
	npm install --no-audit --no-fund --no-package-lock >&2
fi

mkdir -p "$(dirname "$out")"
node_modules/.bin/asc assembly/index.ts --target release --outFile "$out"
echo "built $out" >&2
