#!/usr/bin/env bash
# Build the guard's image (deploy/Dockerfile) of this checkout: the same package.
#
#   scripts/image.sh                  # breakglass:<version>: docker, else buildah
#   scripts/image.sh --tag REGISTRY/breakglass:0.1.0 --save breakglass.tar
#   scripts/image.sh --debian-base    # no registry: Pythons from Debian packages
#
# --builder docker|buildah
#     docker when its engine answers (`docker info`), else buildah: no daemon,
#     chroot isolation, so it also builds where no Docker engine runs (CI
#     containers, this project's test machines)
# --debian-base
#     make the two Python base images from Debian bookworm's own packages
#     (debootstrap; its python3.11 is the CPython minor of python:3.11-*-bookworm)
#     instead of pulling them from Docker Hub: for hosts that reach a Debian
#     mirror and PyPI but no container registry. Needs root. Kept, and reused,
#     in build/image-base/
# --save FILE
#     also write the image as a docker-archive tar, for docker load / podman
#     load -i FILE, ctr -n k8s.io images import FILE, kind load image-archive FILE
# --mirror URL
#     the Debian mirror for --debian-base (default http://deb.debian.org/debian)
# BREAKGLASS_IMAGE_STORE=DIR
#     buildah keeps its images in DIR (vfs driver), not the system's store: the
#     tests use it, so a run leaves nothing in /var/lib/containers
#
# The image's name is the last line of stdout; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
tag="breakglass:${version}"
builder="" debian_base=0 save="" mirror="http://deb.debian.org/debian"
die() { echo "image: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --tag) tag=${2:?--tag needs a name}; shift 2 ;;
        --builder) builder=${2:?--builder needs docker or buildah}; shift 2 ;;
        --debian-base) debian_base=1; shift ;;
        --save) save=${2:?--save needs a file}; shift 2 ;;
        --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option '$1' (scripts/image.sh --help)" ;;
    esac
done
case "$tag" in *[!A-Za-z0-9._/:@-]*|"") die "--tag '$tag': use NAME[:TAG] (letters, digits, . _ - / : @)" ;; esac

if [ -z "$builder" ]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then builder=docker
    elif command -v buildah >/dev/null; then builder=buildah
    else die "neither a Docker engine nor buildah here (apt-get install buildah, or start dockerd)"; fi
fi
case "$builder" in docker|buildah) ;; *) die "--builder '$builder': docker or buildah" ;; esac
command -v "$builder" >/dev/null || die "$builder is not installed"

store=()
if [ "$builder" = buildah ] && [ -n "${BREAKGLASS_IMAGE_STORE:-}" ]; then
    store=(--root "$BREAKGLASS_IMAGE_STORE/root" --runroot "$BREAKGLASS_IMAGE_STORE/run" --storage-driver vfs)
fi
bah() { buildah "${store[@]}" "$@"; }

base_args=()
if [ "$debian_base" = 1 ]; then
    [ "$(id -u)" = 0 ] || die "--debian-base needs root (debootstrap)"
    command -v debootstrap >/dev/null || die "--debian-base needs debootstrap (apt-get install debootstrap)"
    bases=build/image-base/bookworm
    if [ ! -s "$bases/run.tar" ] || [ ! -s "$bases/build.tar" ]; then
        work=$(mktemp -d /tmp/breakglass-image-base.XXXXXX)
        trap 'umount "$work/build/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
        echo "image: debootstrap bookworm (python3.11) from $mirror ..." >&2
        debootstrap --variant=minbase --include=python3,python3-pip,python-is-python3,ca-certificates \
            bookworm "$work/run" "$mirror" >"$work/debootstrap.log" 2>&1 \
            || { tail -5 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
        # The official python images install with plain `pip install`; Debian marks its Python as managed by
        # apt (PEP 668), which would refuse the Dockerfile's install. These images exist only to run pip.
        rm -f "$work"/run/usr/lib/python3*/EXTERNALLY-MANAGED
        cp -a "$work/run" "$work/build"
        # The build stage downloads from PyPI: it trusts what this host trusts (a proxy's CA, say). The run
        # stage installs --no-index and keeps Debian's own bundle.
        cp /etc/ssl/certs/ca-certificates.crt "$work/build/etc/ssl/certs/ca-certificates.crt"
        mount --bind /proc "$work/build/proc"
        chroot "$work/build" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends gcc libc6-dev python3-dev' >>"$work/debootstrap.log" 2>&1 \
            || { tail -5 "$work/debootstrap.log" >&2; die "installing the compiler in the build base failed"; }
        umount "$work/build/proc"
        for fs in run build; do
            rm -rf "$work/$fs"/var/lib/apt/lists/* "$work/$fs"/var/cache/apt/archives/*.deb
        done
        mkdir -p "$bases"
        for fs in run build; do
            tar -C "$work/$fs" --numeric-owner -cf "$bases/.$fs.tar.tmp" . && mv "$bases/.$fs.tar.tmp" "$bases/$fs.tar"
        done
        rm -rf "$work"; trap - EXIT
    fi
    for fs in run build; do
        name="localhost/breakglass-base/python:3.11-bookworm-$fs"
        if [ "$builder" = docker ]; then
            docker import "$bases/$fs.tar" "$name" >/dev/null
        else
            ctr=$(bah from --quiet scratch)
            mnt=$(bah mount "$ctr")
            tar -C "$mnt" --numeric-owner -xf "$bases/$fs.tar"
            bah umount "$ctr" >/dev/null
            bah commit --quiet --rm "$ctr" "$name" >/dev/null
        fi
    done
    base_args=(--build-arg "BUILD_IMAGE=localhost/breakglass-base/python:3.11-bookworm-build"
               --build-arg "RUN_IMAGE=localhost/breakglass-base/python:3.11-bookworm-run")
fi

build_failed() {
    echo "image: $builder could not build $tag (its error is above)" >&2
    [ "$debian_base" = 1 ] || echo "image: no container registry answers for the Python base images? --debian-base" \
        "makes them from Debian's packages" >&2
    exit 1
}
echo "image: building $tag with $builder ..." >&2
if [ "$builder" = docker ]; then
    # docker reads deploy/Dockerfile.dockerignore itself (BuildKit: <Dockerfile>.dockerignore beside it)
    docker build -f deploy/Dockerfile "${base_args[@]}" -t "$tag" . >&2 || build_failed
    [ -z "$save" ] || docker save -o "$save" "$tag"
else
    bah build --quiet --isolation chroot --ignorefile deploy/Dockerfile.dockerignore -f deploy/Dockerfile \
        "${base_args[@]}" -t "$tag" . >&2 || build_failed
    [ -z "$save" ] || bah push --quiet "$tag" "docker-archive:$save:$tag" >&2
fi
echo "$tag"
