#!/usr/bin/env bash
# The root of the upstream interop tier: Debian 13 (trixie), minbase plus
# python3, python3-venv and ca-certificates, made by debootstrap, with a venv
# /opt/fw holding exactly the pinned packages of requirements.txt beside
# this script (flechtwerk[mqtt,secrets] 0.17.0, flechtctl 0.17.0 and every
# transitive dependency). The tests run the real upstream library in it
# through ./run.
#
#   build.sh [ROOT]         build ROOT, or bring it up to date (needs root)
#   build.sh check [ROOT]   exit 0 when ROOT holds the current pinned set;
#                           else say what is missing and exit 1
#
# ROOT defaults to $FLECHT_UPSTREAM_ROOT, else e2e/.run/upstream/root.
# Idempotent: marker files in ROOT record what was built (.flecht-base, the
# debootstrap line; .flecht-venv, the pinned set), so a second run does
# nothing, a changed requirements.txt rebuilds only the venv, and a changed
# base rebuilds everything. A half-built root never counts as built.
#
# The install needs the host's network set-up inside the root: its DNS
# (/etc/resolv.conf) and CA bundle (PIP_CERT, else SSL_CERT_FILE, else
# /etc/ssl/certs/ca-certificates.crt) are copied in, the host's pip
# settings (PIP_* variables; /etc/pip.conf) and proxy variables are passed
# on, and a PIP_FIND_LINKS directory is bound in read-only. pip's default
# index is used unless those settings name another. FLECHT_DEBIAN_MIRROR
# names a Debian mirror for debootstrap (default: debootstrap's own).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd -P)
suite=trixie
include=python3,python3-venv,ca-certificates
requirements=$here/requirements.txt

mode=build
if [ "${1:-}" = check ]; then
	mode=check
	shift
fi
root=${1:-${FLECHT_UPSTREAM_ROOT:-$(dirname "$here")/.run/upstream/root}}

log() { printf '==> %s\n' "$*" >&2; }
die() {
	printf 'e2e/upstream/build.sh: %s\n' "$*" >&2
	exit 1
}

base_pin="debootstrap --variant=minbase --include=$include $suite"
# The pinned set: requirements.txt without comments and blank lines, so a
# reworded comment rebuilds nothing.
venv_pin() { grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$requirements"; }

base_current() { [ -f "$root/.flecht-base" ] && [ "$(cat "$root/.flecht-base")" = "$base_pin" ]; }
venv_current() { [ -f "$root/.flecht-venv" ] && [ "$(cat "$root/.flecht-venv")" = "$(venv_pin)" ]; }

if [ "$mode" = check ]; then
	if ! base_current; then
		echo "no upstream root at $root (or one made by another debootstrap line)"
		exit 1
	fi
	if ! venv_current; then
		echo "the venv in $root does not hold the pinned set of $requirements"
		exit 1
	fi
	echo "upstream root $root holds the pinned set"
	exit 0
fi

if base_current && venv_current; then
	log "upstream root $root is up to date"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || die "building the upstream root needs root (debootstrap, unshare, mount, chroot): run make upstream as root"
for tool in debootstrap unshare chroot mount flock; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found (.ci/run installs debootstrap: apt-get install debootstrap)"
done

mkdir -p "$(dirname "$root")"
root=$(cd "$(dirname "$root")" && pwd -P)/$(basename "$root")
buildlog=$root.log
exec 9>"$root.lock"
flock 9 # one build of a root at a time
started=$SECONDS

# refuse_mounted stops before deleting a tree that still has something
# mounted under it (only ./run mounts there, and only in namespaces of
# its own, so this would be someone else's mount).
refuse_mounted() {
	local dir=$1
	if awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
		die "something is mounted under $dir; unmount it first"
	fi
}

if ! base_current; then
	refuse_mounted "$root"
	refuse_mounted "$root.tmp"
	rm -rf "$root" "$root.tmp"
	mirror=()
	[ -z "${FLECHT_DEBIAN_MIRROR:-}" ] || mirror=("$FLECHT_DEBIAN_MIRROR")
	log "debootstrap $suite into $root (about a minute; log: $buildlog)"
	# In a mount namespace of its own, so the /proc and /sys it mounts in the
	# target cannot outlive a failed run.
	if ! unshare --mount --propagation private -- \
		debootstrap --variant=minbase --include="$include" "$suite" "$root.tmp" "${mirror[@]}" >"$buildlog" 2>&1; then
		tail -n 30 "$buildlog" >&2
		die "debootstrap failed (full log: $buildlog)"
	fi
	echo "$base_pin" >"$root.tmp/.flecht-base"
	mv "$root.tmp" "$root"
	debootstrapped=1
	log "base system ready after $((SECONDS - started))s"
fi

log "installing the pinned packages into $root/opt/fw (log: $buildlog)"
[ -n "${debootstrapped:-}" ] || : >"$buildlog" # a fresh log unless debootstrap just wrote one
rm -f "$root/.flecht-venv"
rm -rf "$root/opt/fw"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
[ -f "$ca" ] || die "no CA bundle at $ca (set PIP_CERT or SSL_CERT_FILE)"
cp -L "$ca" "$root/etc/ssl/certs/flecht-host-ca.crt"
rm -f "$root/etc/pip.conf"
[ ! -f /etc/pip.conf ] || cp -L /etc/pip.conf "$root/etc/pip.conf"

# The environment of the install: a clean one, plus what the host's pip
# and proxies need. Paths are translated: the CA bundle is the copy made
# above, a PIP_CONFIG_FILE is copied in, PIP_FIND_LINKS directories are
# bound in read-only.
envs=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
	PIP_CERT=/etc/ssl/certs/flecht-host-ca.crt SSL_CERT_FILE=/etc/ssl/certs/flecht-host-ca.crt
	PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1)
binds=(-r "$here")
while IFS='=' read -r name value; do
	case $name in
	PIP_CERT | PIP_CLIENT_CERT | PIP_NO_INPUT | PIP_DISABLE_PIP_VERSION_CHECK) ;;
	PIP_CONFIG_FILE)
		if [ -f "$value" ]; then
			cp -L "$value" "$root/etc/pip-host.conf"
			envs+=(PIP_CONFIG_FILE=/etc/pip-host.conf)
		fi
		;;
	PIP_FIND_LINKS)
		for dir in $value; do
			[ ! -d "$dir" ] || binds+=(-r "$dir")
		done
		envs+=("$name=$value")
		;;
	PIP_* | http_proxy | https_proxy | no_proxy | HTTP_PROXY | HTTPS_PROXY | NO_PROXY)
		envs+=("$name=$value")
		;;
	esac
done < <(env)

run() { "$here/run" "$root" "${binds[@]}" -- /usr/bin/env -i "${envs[@]}" "$@"; }
if ! run /bin/sh -c "python3 -m venv /opt/fw && /opt/fw/bin/pip install --no-cache-dir --only-binary=:all: -r '$requirements'" >>"$buildlog" 2>&1; then
	tail -n 30 "$buildlog" >&2
	die "installing the pinned packages failed (full log: $buildlog)"
fi

# Every installed distribution must be one of the pinned set, at its pinned
# version: a dependency that a new release added would otherwise come in
# unpinned and make the next run test other code.
if ! run /opt/fw/bin/python -c '
import importlib.metadata as md, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
pinned = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith("#"):
        name, version = line.split("==")
        pinned[norm(name.split("[")[0])] = version
installed = {norm(d.metadata["Name"]): d.version for d in md.distributions()}
installed.pop("pip", None)
if installed != pinned:
    extra = sorted(f"{n}=={v}" for n, v in installed.items() if pinned.get(n) != v)
    missing = sorted(f"{n}=={v}" for n, v in pinned.items() if installed.get(n) != v)
    sys.exit(f"the venv differs from the pinned set: installed but not pinned {extra}, pinned but not installed {missing}")
import flechtwerk, flechtwerk.secrets, flechtwerk.mqtt, flechtctl.tokens
' "$requirements" >>"$buildlog" 2>&1; then
	tail -n 5 "$buildlog" >&2
	die "the venv in $root is not the pinned set (full log: $buildlog)"
fi

venv_pin >"$root/.flecht-venv"
log "upstream root $root ready after $((SECONDS - started))s: $(run /opt/fw/bin/flechtctl --version)"
