#!/usr/bin/env bash
# Build the real components listed in go/versions from their published Go modules:
#   scripts/gobuild.sh [--if-go] [COMPONENT...]     (default: every component in go/versions)
# --if-go: without a Go toolchain, say so in one line and succeed (the tests that need these builds then skip
# with a reason), except under CI=true, where a missing toolchain fails the run.
# Each lands in build/<component>/v<version>/<component>. Go's module and build caches make a second run a
# link step at most; nothing of the upstream code is kept in this repository.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if_go=0
if [ "${1:-}" = "--if-go" ]; then if_go=1; shift; fi
if ! command -v go >/dev/null; then
  if [ $if_go = 1 ] && [ "${CI:-}" != "true" ]; then
    echo "gobuild: no Go toolchain on PATH: skipping the real kube-apiserver/Talos builds; their tests will skip" >&2
    exit 0
  fi
  echo "gobuild: no Go toolchain on PATH (https://go.dev/doc/install)" >&2; exit 1
fi
export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED="${CGO_ENABLED:-0}"

ldflags_for() {  # component version -> the -X flags upstream's release build sets
  case "$1" in
    kube-apiserver)
      local minor; minor=$(echo "$2" | cut -d. -f2)
      echo "-s -w -X k8s.io/component-base/version.gitVersion=v$2 -X k8s.io/component-base/version.gitMajor=1" \
           "-X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" ;;
    *) echo "-s -w" ;;
  esac
}

want=("$@")
grep -v '^\s*#' go/versions | while read -r component version; do
  [ -n "${component:-}" ] || continue
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $component " ]]; then continue; fi
  out="$root/build/$component/v$version/$component"
  mkdir -p "$(dirname "$out")"
  start=$(date +%s)
  echo "gobuild: $component v$version -> ${out#"$root"/}"
  (cd "go/$component" && go build -modfile="v$version.mod" -trimpath -ldflags "$(ldflags_for "$component" "$version")" -o "$out" .)
  echo "gobuild: $component v$version built in $(( $(date +%s) - start ))s"
done
