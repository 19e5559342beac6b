#!/usr/bin/env bash
# Fail when etc/nova-ext.conf.sample is not what the options generate.
# Regenerate with: oslo-config-generator --config-file etc/nova-ext-config-generator.conf
set -euo pipefail
cd "$(dirname "$0")/.."
fresh=$(mktemp)
trap 'rm -f "$fresh"' EXIT
oslo-config-generator --config-file etc/nova-ext-config-generator.conf \
    --output-file "$fresh"
if ! diff -u etc/nova-ext.conf.sample "$fresh"; then
    echo "etc/nova-ext.conf.sample is stale: regenerate it with" >&2
    echo "  oslo-config-generator --config-file etc/nova-ext-config-generator.conf" >&2
    exit 1
fi
