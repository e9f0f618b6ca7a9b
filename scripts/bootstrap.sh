#!/usr/bin/env bash
# Install the Debian packages breakglass needs, only those missing.
#   bootstrap.sh python   what creating the virtual environment needs
#   bootstrap.sh demo     what `make demo` needs (the sandbox's etcd)
#   bootstrap.sh test     what the test suite needs besides Python packages
set -euo pipefail

want=()
case "${1:-}" in
  python)
    command -v python3 >/dev/null || want+=(python3)
    python3 -c 'import venv, ensurepip' 2>/dev/null || want+=(python3-venv)
    # the optional newline counter (breakglass/logs/_newlines.c) is compiled at install: a C compiler and
    # Python's headers (without them the install still works, with bytes.count instead)
    command -v cc >/dev/null || want+=(gcc)
    python3 -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
      2>/dev/null || want+=(python3-dev)
    ;;
  demo)
    command -v etcd >/dev/null || want+=(etcd-server)      # the rehearsal sandbox runs a real etcd
    ;;
  test)
    command -v grep >/dev/null || want+=(grep)
    command -v etcd >/dev/null || want+=(etcd-server)      # tests start a real etcd on loopback
    command -v etcdctl >/dev/null || want+=(etcd-client)   # benchmarks compare against etcdctl
    [ -x /usr/sbin/sshd ] || want+=(openssh-server)        # tests start a real sshd on loopback
    command -v ssh-keygen >/dev/null || want+=(openssh-client)
    command -v sudo >/dev/null || want+=(sudo)             # tests log in as a non-root user using sudo -n
    command -v kubectl >/dev/null || want+=(kubernetes-client)  # the kubectl plugin test runs `kubectl breakglass`
    command -v unshare >/dev/null || want+=(util-linux)    # the bundle test runs it with no network
    ls /usr/bin/qemu-*-static >/dev/null 2>&1 || want+=(qemu-user-static)  # ... and on the other machine's Python
    command -v debootstrap >/dev/null || want+=(debootstrap)  # ... from Debian's packages for that machine
    command -v prometheus >/dev/null || want+=(prometheus)  # the exporter is scraped by a real Prometheus; promtool
    command -v prometheus-pushgateway >/dev/null || want+=(prometheus-pushgateway)  # the chart's CronJob pushes
    command -v buildah >/dev/null || want+=(buildah)       # the guard's image is built for real, with no daemon
    command -v podman >/dev/null || want+=(podman)         # ... and run as the chart's pod runs it
    command -v runc >/dev/null || want+=(runc)             # ... by runc (crun refuses hybrid cgroups, seen here)
    command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null \
      || want+=(chromium-headless-shell)                   # the manual's pages are looked at in a real browser
    ;;
  *) echo "usage: $0 python|demo|test" >&2; exit 2 ;;
esac

[ ${#want[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root to install: ${want[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "installing Debian packages: ${want[*]}"
export DEBIAN_FRONTEND=noninteractive
# Debian's etcd-server enables and starts etcd.service when it is installed. breakglass wants only its binary
# (the sandbox and the tests start their own etcd on loopback, in their own directory), so no service is
# started during this install (policy-rc.d says no to invoke-rc.d), and the service is disabled after it.
# The same holds for Prometheus and its Pushgateway: the tests run their own, on loopback, in a temp directory.
services=()
for p in "${want[@]}"; do
  case "$p" in etcd-server) services+=(etcd.service) ;; prometheus|prometheus-pushgateway) services+=("$p.service") ;; esac
done
etcd_service=no
[ ${#services[@]} -gt 0 ] && etcd_service=yes
if [ "$etcd_service" = yes ] && [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\n# breakglass scripts/bootstrap.sh: no service starts while it installs its packages\nexit 101\n' |
    $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod 755 /usr/sbin/policy-rc.d
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
# A fresh VM's unattended upgrades hold the dpkg lock for minutes: wait for it instead of failing at once.
lock=(-o DPkg::Lock::Timeout=600)
$sudo apt-get "${lock[@]}" update -qq
$sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends "${want[@]}"
if [ "$etcd_service" = yes ]; then
  for svc in "${services[@]}"; do
    if [ -d /run/systemd/system ]; then
      $sudo systemctl disable --now "$svc" >/dev/null 2>&1 || true
      state="$(systemctl is-enabled "$svc" 2>/dev/null || true), $(systemctl is-active "$svc" 2>/dev/null || true)"
      echo "${svc%.service} was installed for its binary only: $svc is left ${state} (breakglass never uses it)"
    else
      echo "${svc%.service} was installed for its binary only: no systemd here, and its service was not started"
    fi
  done
fi
