#!/usr/bin/env bash
# Build the real components listed in go/versions from their published Go modules:
#   scripts/gobuild.sh [--if-go] [--now|--later-in-background|--later] [COMPONENT[@VERSION]...]
#                                                   (default: every line of go/versions, in the foreground)
# --if-go: without a Go toolchain, say so in one line and succeed (the tests that need these builds then skip
# with a reason), except under CI=true, where a missing toolchain fails the run.
# --now: only the lines not marked `later`. --later-in-background: start the `later` lines' build detached, at
# nice 19, and return at once (`make test` runs the tests meanwhile: the build takes the CPU the tests leave
# idle while they wait on apiservers, and the tests that need a later build run last and wait for it; see
# tests/real_control_plane.py). Its log is build/later.log, its pid build/later.pid, its exit code
# build/later.rc. --later: build only the `later` lines, in the foreground (what the background runs).
# Each lands in build/<component>/v<version>/<component>. Go's module and build caches make a second run a
# link step at most; nothing of the upstream code is kept in this repository.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if_go=0 when=all
if [ "${1:-}" = "--if-go" ]; then if_go=1; shift; fi
case "${1:-}" in --now) when=now; shift ;; --later) when=later; shift ;; --later-in-background) when=bg; shift ;; esac
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
    kine) echo "-s -w -X github.com/k3s-io/kine/pkg/version.Version=v$2" ;;
    kyverno) echo "-s -w -X github.com/kyverno/kyverno/pkg/version.BuildVersion=v$2" ;;
    gatekeeper) echo "-s -w -X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=v$2" ;;
    helm)  # helm's Makefile: its version, and the Kubernetes version of its client-go (1.<minor of v0.minor>)
      local kminor; kminor=$(sed -n 's|^\s*k8s.io/client-go v0\.\([0-9]*\)\..*|\1|p' "$root/go/helm/v$2.mod")
      echo "-s -w -X helm.sh/helm/v3/internal/version.version=v$2 -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
           "-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kminor" \
           "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kminor" ;;
    *) echo "-s -w" ;;
  esac
}

# component -> what else its upstream release build sets: "<CGO_ENABLED> [build tags]". kine's releases (and k3s,
# which embeds it) use cgo's mattn/go-sqlite3 with these SQLite build tags (its scripts/build, minus nats: we run
# only its SQLite backend); without a C compiler kine builds its pure-Go SQLite (modernc.org/sqlite, what its
# -nocgo images ship) instead, said in one line.
build_env_for() {
  case "$1" in
    kine)
      local tags=sqlite_unlock_notify,sqlite_vtable,sqlite_stat4,sqlite_preupdate_hook,sqlite_math_functions,sqlite_dbstat,sqlite_column_metadata
      if command -v "$(go env CC)" >/dev/null; then echo "1 $tags"
      else echo "gobuild: no C compiler (gcc): building kine's pure-Go SQLite (modernc.org/sqlite) instead of mattn/go-sqlite3" >&2
           echo "0 $tags"; fi ;;
    *) echo "$CGO_ENABLED" ;;
  esac
}

# component -> what is built, one "<package> <binary name>" a line: our main.go in go/<component>, or upstream's own
# main packages (which cannot be imported), named by the .mod's `tool` directive: helm's cmd/helm, konnectivity's
# server and agent, Gatekeeper's module root, Kyverno's admission controller.
packages_for() {
  case "$1" in
    helm) echo "helm.sh/helm/v3/cmd/helm helm" ;;
    konnectivity) echo "sigs.k8s.io/apiserver-network-proxy/cmd/server konnectivity-server"
                  echo "sigs.k8s.io/apiserver-network-proxy/cmd/agent konnectivity-agent" ;;
    gatekeeper) echo "github.com/open-policy-agent/gatekeeper/v3 gatekeeper" ;;
    kyverno) echo "github.com/kyverno/kyverno/cmd/kyverno kyverno" ;;
    *) echo ". $1" ;;
  esac
}

if [ $when = bg ]; then
  mkdir -p build
  grep -v '^\s*#' go/versions | grep -q ' later\s*$' || exit 0
  rm -f build/later.rc
  setsid nice -n 19 bash -c 'bash scripts/gobuild.sh --later "$@"; echo $? > build/later.rc; rm -f build/later.pid' \
    gobuild "$@" > build/later.log 2>&1 < /dev/null &
  echo $! > build/later.pid
  echo "gobuild: building the later components in the background at nice 19 (build/later.log, pid $!)"
  exit 0
fi

want=("$@")
grep -v '^\s*#' go/versions | while read -r component version mark; do
  [ -n "${component:-}" ] || continue
  if [ $when = now ] && [ "${mark:-}" = later ]; then continue; fi
  if [ $when = later ] && [ "${mark:-}" != later ]; then continue; fi
  # COMPONENT or COMPONENT@VERSION (make demo builds only the apiserver its story runs)
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $component " ]] && [[ ! " ${want[*]} " =~ " $component@$version " ]]; then
    continue
  fi
  dir="$root/build/$component/v$version"
  mkdir -p "$dir"
  start=$(date +%s)
  read -r cgo tags < <(build_env_for "$component")
  linked=0
  while read -r package name; do
    # A warm machine links nothing it already has: the binary is kept with a digest of everything that decides
    # it (toolchain, our main package, the .mod/.sum, flags); the same digest means the same binary, so the
    # ~5-15 s link of each is skipped. Anything else (or no digest) builds as before.
    inputs=$( { go version; echo "$cgo ${tags:-} $package $(ldflags_for "$component" "$version")"
                cat "go/$component/v$version.mod" "go/$component/v$version.sum" go/"$component"/*.go 2>/dev/null || true; } \
              | sha256sum | cut -d' ' -f1)
    if [ -x "$dir/$name" ] && [ "$(cat "$dir/$name.inputs" 2>/dev/null)" = "$inputs" ]; then continue; fi
    echo "gobuild: $component v$version -> ${dir#"$root"/}/$name"
    rm -f "$dir/$name.inputs"
    (cd "go/$component" && CGO_ENABLED=$cgo go build -modfile="v$version.mod" -trimpath -tags="${tags:-}" \
       -ldflags "$(ldflags_for "$component" "$version")" -o "$dir/$name.tmp" "$package") </dev/null
    mv -f "$dir/$name.tmp" "$dir/$name"  # whole or absent: a test waiting for it never runs half a binary
    echo "$inputs" > "$dir/$name.inputs"
    linked=1
  done < <(packages_for "$component")
  if [ $linked = 1 ]; then echo "gobuild: $component v$version built in $(( $(date +%s) - start ))s"
  else echo "gobuild: $component v$version up to date"; fi
done
