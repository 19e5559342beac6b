#!/usr/bin/env bash
# Create (or reuse) the project venv with the pinned stack and nova-ext in it.
# Prints the venv path. Needs only python3 (3.11) and access to PyPI.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

# The Nova release to test against: 2026.2 (Nova 34, the default) or 2026.1
# (Nova 33). Each has its own constraints file (with the matching placement)
# and its own venv, so switching back and forth reinstalls nothing.
release=${NOVA_EXT_NOVA_RELEASE:-2026.2}
case "$release" in
    2026.2) constraints=constraints.txt; default_venv=$top/.venv ;;
    2026.1) constraints=constraints-2026.1.txt; default_venv=$top/.venv-2026.1 ;;
    *) echo "NOVA_EXT_NOVA_RELEASE=$release: supported releases are 2026.2 (default) and 2026.1" >&2
       exit 1 ;;
esac
venv=${NOVA_EXT_VENV:-$default_venv}

# Reinstall whenever the pins or the package metadata change.
stamp=$(cat "$top/$constraints" "$top/requirements.txt" \
        "$top/test-requirements.txt" "$top/doc/requirements.txt" \
        "$top/setup.cfg" | sha256sum | cut -c1-16)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.nova-ext-stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$venv"
    exit 0
fi

# One builder at a time: ./run-tests.sh all builds the 2026.1 venv in the
# background while the system tier's rolling-upgrade test asks for it too.
# The second waits for the first (flock), then finds the stamp written and
# reuses the venv instead of deleting it under the first's feet.
if command -v flock >/dev/null; then
    exec 9>"${venv%/}.lock"
    flock 9
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.nova-ext-stamp" 2>/dev/null)" = "$stamp" ]; then
        echo "$venv"
        exit 0
    fi
fi

"$python" - <<'PY' >&2 || exit 1
import sys
if sys.version_info[:2] != (3, 11):
    sys.exit("nova-ext is tested on Python 3.11; found %s" % sys.version.split()[0])
PY
# Only a directory this script created (its marker inside) is deleted and
# rebuilt: NOVA_EXT_VENV may name any directory, and one of the operator's
# must never go. An empty directory is used as it is.
marker=.nova-ext-venv
if [ -e "$venv" ] || [ -L "$venv" ]; then
    if [ -d "$venv" ] && [ ! -L "$venv" ] && { [ -f "$venv/$marker" ] || [ -f "$venv/.nova-ext-stamp" ]; }; then
        ours=1
    elif [ -d "$venv" ] && [ ! -L "$venv" ] && [ -z "$(ls -A "$venv")" ]; then
        :
    else
        echo "$venv exists and is not a venv tools/ensure-venv.sh created (no $marker in it); not deleting it: point NOVA_EXT_VENV elsewhere or remove it yourself" >&2
        exit 1
    fi
fi
echo "Setting up $venv (Nova $release, pinned by $constraints; about a minute)..." >&2
# libvirt-python (test-requirements.txt) compiles against libvirt's headers
if ! pkg-config --exists libvirt 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "Installing libvirt-dev and pkg-config (libvirt-python builds against them)..." >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            libvirt-dev pkg-config >&2 || exit 1
    else
        echo "libvirt-python needs libvirt's headers: apt-get install libvirt-dev pkg-config" >&2
        exit 1
    fi
fi
[ -z "${ours:-}" ] || rm -rf "$venv"
mkdir -p "$venv"
echo "created by nova-ext's tools/ensure-venv.sh; it deletes and rebuilds this directory" > "$venv/$marker"
"$python" -m venv "$venv"
log="$venv/install.log"
if ! (cd "$top" && PBR_VERSION=${PBR_VERSION:-0.1.0} "$venv/bin/pip" install \
        -c "$constraints" -r requirements.txt -r test-requirements.txt \
        -r doc/requirements.txt -e ".[sandbox,simulator]" >"$log" 2>&1); then
    tail -40 "$log" >&2
    echo "pip install failed; full log: $log" >&2
    exit 1
fi
echo "$stamp" > "$venv/.nova-ext-stamp"
echo "$venv"
