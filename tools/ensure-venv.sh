#!/usr/bin/env bash
# Create (or reuse) the project venv with the pinned stack and nova-ext in it.
# Prints the venv path. Needs only python3 (3.11) and access to PyPI.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${NOVA_EXT_VENV:-$top/.venv}
python=${PYTHON:-python3}

# Reinstall whenever the pins or the package metadata change.
stamp=$(cat "$top/constraints.txt" "$top/requirements.txt" \
        "$top/test-requirements.txt" "$top/setup.cfg" | sha256sum | cut -c1-16)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.nova-ext-stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$venv"
    exit 0
fi

"$python" - <<'PY' >&2 || exit 1
import sys
if sys.version_info[:2] != (3, 11):
    sys.exit("nova-ext is tested on Python 3.11; found %s" % sys.version.split()[0])
PY
echo "Setting up $venv (pinned by constraints.txt; about a minute)..." >&2
rm -rf "$venv"
"$python" -m venv "$venv"
log="$venv/install.log"
if ! (cd "$top" && PBR_VERSION=${PBR_VERSION:-0.1.0} "$venv/bin/pip" install \
        -c constraints.txt -r requirements.txt -r test-requirements.txt \
        -e . >"$log" 2>&1); then
    tail -40 "$log" >&2
    echo "pip install failed; full log: $log" >&2
    exit 1
fi
echo "$stamp" > "$venv/.nova-ext-stamp"
echo "$venv"
