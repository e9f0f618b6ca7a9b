"""Where k3s and RKE2 keep what breakglass reads and changes: the config file, the service, the node's admin
kubeconfig, and the defaults their kube-apiserver starts with. Facts only, so both the SSH probe (which
distribution a node runs) and the k3s/RKE2 way out read one table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Distro:
    name: str
    config: str  # the main config file
    service: str  # the systemd unit that reads it at start
    kubeconfig: str  # the node's own admin kubeconfig
    node_backup_dir: str  # outside config.yaml.d: k3s reads every *.yaml there
    defaults: tuple = ()  # (name, value): GetArgs' initial args, the distribution's own defaults
    prepended: tuple = ()  # extra args the distribution puts before the user's


DISTROS = {
    # k3s' pkg/daemons/control/server.go; only the defaults that matter here (the others are never admission's)
    "k3s": Distro("k3s", "/etc/rancher/k3s/config.yaml", "k3s", "/etc/rancher/k3s/k3s.yaml",
                  "/etc/rancher/k3s/breakglass-backup",
                  (("anonymous-auth", "false"), ("enable-admission-plugins", "NodeRestriction"),
                   ("profiling", "false"))),
    # RKE2 runs the same code and also prepends enable-admission-plugins=NodeRestriction to the user's
    # kube-apiserver-arg (pkg/cli/defaults/defaults.go); it writes the result into a static pod on start.
    "rke2": Distro("rke2", "/etc/rancher/rke2/config.yaml", "rke2-server", "/etc/rancher/rke2/rke2.yaml",
                   "/etc/rancher/rke2/breakglass-backup",
                   (("anonymous-auth", "false"), ("enable-admission-plugins", "NodeRestriction"),
                    ("profiling", "false")),
                   ("enable-admission-plugins=NodeRestriction",)),
}
