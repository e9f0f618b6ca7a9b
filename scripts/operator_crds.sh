#!/usr/bin/env bash
# prometheus-operator's published CRDs for the two kinds the guard's chart renders (PrometheusRule and
# ServiceMonitor, monitoring.coreos.com/v1), so tests/test_chart.py can create them in the real kube-apiserver
# and validate the chart's objects against their schemas:
#   scripts/operator_crds.sh        -> prints the directory holding them, build/operator-crds/v<version>/
# They come from the operator's own Go module at a release tag (its example/prometheus-operator-crd/, the files
# its release attaches as CRD manifests), fetched with `go mod download`: the Go module proxy serves it and the
# go command checks the zip against the checksum database (GOSUMDB, sum.golang.org through the proxy) before
# unpacking it into the module cache. Nothing of it is kept in this repository (build/ is git-ignored).
# Without a Go toolchain, or when the download fails, it says why on stderr and exits 1: the tests then skip
# locally and fail under CI=true (tests/test_chart.py: operator_crds).
set -euo pipefail
cd "$(dirname "$0")/.."

# v0.85.0 (2025-08-21): the newest (and only) prometheus-operator release the Go module proxy serves here
# (`go list -m -versions github.com/prometheus-operator/prometheus-operator`); its CRDs are the v1 schemas of
# PrometheusRule and ServiceMonitor that clusters run today. Bump it here only: this is the one pin.
VERSION=0.85.0
MODULE=github.com/prometheus-operator/prometheus-operator
FILES=(monitoring.coreos.com_prometheusrules.yaml monitoring.coreos.com_servicemonitors.yaml)

out="build/operator-crds/v$VERSION"
have=1
for f in "${FILES[@]}"; do [ -s "$out/$f" ] || have=0; done
if [ $have = 1 ]; then echo "$PWD/$out"; exit 0; fi

if ! command -v go >/dev/null; then
  echo "operator_crds: no Go toolchain on PATH (https://go.dev/doc/install): cannot fetch $MODULE@v$VERSION" >&2
  exit 1
fi
start=$(date +%s)
# run outside any module (from /), so only this module is resolved; its errors are in the JSON's "Error"
if ! json=$(cd / && go mod download -json "$MODULE@v$VERSION"); then
  echo "operator_crds: go mod download $MODULE@v$VERSION failed: $json" >&2; exit 1
fi
dir=$(printf '%s\n' "$json" | sed -n 's/^\s*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  echo "operator_crds: go mod download $MODULE@v$VERSION gave no module directory: $json" >&2; exit 1
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
for f in "${FILES[@]}"; do
  src="$dir/example/prometheus-operator-crd/$f"
  [ -s "$src" ] || { echo "operator_crds: $MODULE@v$VERSION has no example/prometheus-operator-crd/$f" >&2; exit 1; }
  # the module cache is read-only: the copies need not be
  install -m 0644 "$src" "$out.tmp/$f"
done
rm -rf "$out" && mv "$out.tmp" "$out"
echo "operator_crds: $MODULE@v$VERSION's CRDs -> $out in $(( $(date +%s) - start ))s" >&2
echo "$PWD/$out"
