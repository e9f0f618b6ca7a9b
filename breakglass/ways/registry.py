"""The ways out, as one registry: what each is, what it costs, which access it needs, and its options.

Every front end lists and drives this table: `breakglass recover WAY` (one subcommand per way, generated from
``Way.options``), plan files (typed from the same options), `recover --auto`, and the wizard. No flow decides on
its own which way an access can use: ``usable`` does, and a way it refuses is never offered as usable.

A way may be reached in more than one manner (a *variant*): Talos through talosctl or a machine-config file,
kubeadm over SSH or a manifest on this machine, k3s/RKE2 over SSH or a config.yaml here. The variant follows from
the access; the way's name, rank and guards do not change with it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Opt:
    """One option of a way out, as `recover WAY --help` shows it and a plan file may set it."""

    name: str  # the Python name; the flag is --name-with-dashes unless ``flags`` says otherwise
    kind: str  # str | list | bool | float | int | choice
    default: object = None
    help: str = ""
    flags: tuple = ()
    choices: tuple = ()
    minimum: float | None = None
    metavar: str | None = None
    # What the option makes breakglass trust or run, when it does: a program, a credential, a CA, the SSH host-key
    # policy. Such an option comes from the command line or the environment only, never from a plan file (plans
    # are shared in runbooks and repositories: they say what to change and how long to wait). Say it for a new one.
    trust: str = ""

    @property
    def flag(self) -> str:
        return self.flags[0] if self.flags else "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Variant:
    name: str  # e.g. "talosctl", "file"
    label: str  # how the ways-out list names it
    needs: str  # the access probe that must answer: apiserver | talos | talos-file | ssh | manifest | k3s-file | etcd
    tradeoff: str = ""  # the variant's own cost where it differs from the way's (a file edited here restarts nothing)


@dataclass(frozen=True)
class Way:
    name: str
    rank: int  # least invasive first
    summary: str
    tradeoff: str
    variants: tuple  # of Variant, in the order they are preferred when several accesses are given
    options: tuple = ()  # of Opt: this way's own options (the common ones are added by the front end)
    examples: tuple = ()
    disables_plugins: bool = False  # switches every webhook off cluster-wide (the admission-plugin flag)
    distro: str | None = None  # the distribution whose nodes it edits (kubeadm, k3s, rke2), for the SSH probe
    cost: str = ""  # one line for `recover --help`
    static_only: bool = False  # only for manifest-based configurations (1.36+: files on the nodes)


@dataclass
class Verdict:
    """Whether a way can act with the access given, and how (``variant``) or why not (``reason``)."""

    way: Way
    variant: Variant | None
    reason: str = ""

    @property
    def usable(self) -> bool:
        return self.variant is not None


# -- the options a way declares (the common ones: state dir, output, --yes, --dry-run, are the front end's) --------
TARGETS = (
    Opt("webhook_config", "list", None, "Configuration to act on: NAME, kind/NAME, its etcd key, or webhook:NAME (the "
        "configuration(s) defining that webhook, read from the cluster). Repeatable.", ("--webhook-config", "-w")),
    Opt("webhook", "list", None, "A webhook's name, as the log says it: the configuration(s) that define it are read "
        "from the cluster (the same as -w webhook:NAME)."),
    Opt("kind", "list", None, "Limit NAME lookups to these kinds: validating, mutating, vap, vapbinding, map, "
        "mapbinding."),
    Opt("diagnosis", "str", None, "`breakglass diagnose -o json` output saved in this file: its culprits (webhooks it "
        "did not place are looked up in the cluster)."),
)
PLUGINS = (
    Opt("plugins", "list", None, "Admission plugins to disable (default: the diagnosis's, else both webhook "
        "plugins)."),
    Opt("diagnosis", "str", None, "`breakglass diagnose -o json` output saved in this file: the plugins it names."),
)
WAIT = (
    Opt("wait", "bool", True, "Wait for every apiserver's /readyz afterwards (without it: exit 8, not verified)."),
    Opt("wait_timeout", "float", 300.0, "Seconds to wait for /readyz.", minimum=1),
    Opt("apiserver", "list", None, "apiserver URL(s) to wait on (default: https://NODE:6443 for each node)."),
)
TIMEOUT = (Opt("timeout", "float", None, "Seconds for each connection (etcd, SSH, talosctl, the API).",
               minimum=0.1),)
KUBE = (
    Opt("kubeconfig", "str", None, "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).",
        trust="the apiserver's credentials and CA, and the exec plugins it runs"),
    Opt("context", "str", None, "kubeconfig context (default: its current-context)."),
)
SSH = (
    Opt("ssh", "list", None, "Control-plane hosts to reach over SSH, comma-separated.", ("--ssh",)),
    Opt("ssh_user", "str", None, "SSH user (default: ~/.ssh/config, else $USER)."),
    Opt("ssh_key", "str", None, "SSH private key (default: IdentityFile, agent).", trust="the SSH private key"),
    Opt("ssh_port", "int", None, "SSH port (default: ~/.ssh/config, else 22)."),
    Opt("ssh_accept_new", "bool", False, "Accept and record unknown host keys (OpenSSH accept-new); changed keys are "
        "always refused.", trust="the SSH host-key policy"),
    Opt("ssh_config", "str", "~/.ssh/config", "OpenSSH client config to honour.",
        trust="the OpenSSH config (its ProxyCommand, identities and host-key settings)"),
    Opt("known_hosts", "str", "~/.ssh/known_hosts", "known_hosts file.", trust="the SSH host keys"),
)
NODE_WAIT = (
    Opt("verify_timeout", "float", 180.0, "Seconds to wait for a kube-apiserver process with the new flag (0: skip).",
        minimum=0),
    Opt("node_backup_dir", "str", "/etc/kubernetes/breakglass-backup", "Where the node keeps its copy of the old "
        "file (never the manifests directory)."),
)
TALOS = (
    Opt("nodes", "list", None, "Control-plane nodes (every one runs an apiserver), comma-separated.",
        ("--nodes", "-n")),
    Opt("config_file", "list", None, "Patch machine-config files (managed as code) instead of live nodes: edited "
        "here, not applied (exit 8; -n names the nodes they are for, in the apply command). Repeatable."),
    Opt("write_patch", "str", None, "Only write the strategic-merge patch (and FILE.revert.yaml) for your own "
        "tooling."),
    Opt("try_for", "str", None, "Apply in talosctl's --mode=try with this --timeout (10m, 1h30m; at least 1m): "
        "each node puts its previous config back by itself at the deadline, re-arming the webhooks even if "
        "nobody reverts (a dead man's switch). With --config-file, the apply command printed uses it.",
        metavar="DURATION"),
    Opt("talosconfig", "str", None, "talosconfig file (default: $TALOSCONFIG, then talosctl's own defaults).",
        trust="the Talos API's client certificate and CA"),
    Opt("talos_context", "str", None, "talosconfig context.", ("--talos-context",)),
    Opt("talos_endpoints", "str", None, "Talos API endpoints (talosctl -e), comma-separated.",
        ("--talos-endpoints", "-e")),
    Opt("talosctl", "str", "talosctl", "The talosctl binary.", trust="the program that runs"),
)
ETCD = (
    Opt("etcd_endpoints", "str", None, "etcd endpoints, comma-separated (default: $ETCDCTL_ENDPOINTS, else "
        "https://127.0.0.1:2379)."),
    Opt("etcd_cacert", "str", None, "etcd CA certificate (default: $ETCDCTL_CACERT).", trust="the CA etcd is checked "
        "against"),
    Opt("etcd_cert", "str", None, "etcd client certificate (default: $ETCDCTL_CERT).",
        trust="the etcd client certificate"),
    Opt("etcd_key", "str", None, "etcd client key (default: $ETCDCTL_KEY).", trust="the etcd client key"),
    Opt("etcd_user", "str", None, "etcd user (default: $ETCDCTL_USER); the password is asked for, or "
        "$ETCDCTL_PASSWORD.", trust="the etcd credentials (USER or USER:PASSWORD)"),
    Opt("etcd_password", "str", None, "etcd password (prefer $ETCDCTL_PASSWORD: a flag shows in ps).",
        trust="the etcd password"),
    Opt("etcd_prefix", "str", "/registry", "The apiserver's --etcd-prefix (k3s with embedded etcd: /registry; "
        "kine: /registry)."),
    Opt("etcd_via_ssh", "str", None, "Reach etcd on this node through SSH; the etcd options are then as the node "
        "sees them (kubeadm's, k3s'/RKE2's certificates, or k3s' kine socket when none are given)."),
)

_FLAG_TRADEOFF = "Switches off every webhook cluster-wide until reverted: a security gap"

WAYS = (
    Way("kubeapi", 1, "Patch or delete the configuration through the apiserver.",
        "Least invasive, audited, no restart; an operator may recreate the configuration.",
        (Variant("api", "through the apiserver", "apiserver"),),
        TARGETS + KUBE + TIMEOUT + (
            Opt("action", "choice", "ignore", "ignore (failurePolicy Ignore), exclude (add the audit's "
                "matchConditions) or delete.", choices=("ignore", "exclude", "delete")),
            Opt("wait", "bool", True, "Wait for the apiserver's /readyz afterwards (without it: exit 8, not "
                "verified)."), WAIT[1]),
        ("breakglass recover kubeapi -w kyverno-resource-validating-webhook-cfg --dry-run",
         "breakglass recover kubeapi --webhook validate.kyverno.svc-fail --action exclude --context prod"),
        cost="least invasive: one object, through the apiserver, audited"),
    Way("static-manifests", 2, "Set failurePolicy Ignore on a manifest-based webhook (1.36+) in its file on every "
        "control-plane node.",
        "Only the named webhooks stop refusing; no restart (the apiserver reloads the directory). For configurations "
        "named *.static.k8s.io, which neither the API nor etcd holds.",
        (Variant("ssh", "over SSH", "ssh"), Variant("local", "in a staticManifestsDir on this machine", "static-dir")),
        (Opt("webhook", "list", None, "The manifest-based webhook(s) to set to Ignore, as the log names them."),
         Opt("webhook_config", "list", None, "Or every webhook of these configurations (NAME.static.k8s.io).",
             ("--webhook-config", "-w")),
         TARGETS[3]) + SSH + (
            Opt("static_manifests", "str", None, "The staticManifestsDir (on the nodes with --ssh, else here on the "
                "node; default: the one the apiserver's --admission-control-config-file names)."),
            Opt("manifest_path", "str", "/etc/kubernetes/manifests/kube-apiserver.yaml",
                "The kube-apiserver static pod manifest whose flags name the directory."),
            NODE_WAIT[1]) + WAIT + TIMEOUT,
        ("breakglass recover static-manifests --ssh cp1,cp2,cp3 --webhook deny.guard.example.com --dry-run",
         "sudo breakglass recover static-manifests --static-manifests /etc/kubernetes/admission/static "
         "-w guard.static.k8s.io"),
        static_only=True, cost="only the named manifest-based webhooks stop refusing; no restart"),
    Way("talos", 3, "Disable the webhook admission plugins in every control-plane node's machine config.",
        _FLAG_TRADEOFF + ".",
        (Variant("talosctl", "through talosctl", "talos"),
         Variant("file", "in machine-config files", "talos-file",
                 _FLAG_TRADEOFF + "; edited, not applied: no node has it until you apply the file (talosctl "
                                  "apply-config --mode=no-reboot).")),
        PLUGINS + TALOS + WAIT + TIMEOUT,
        ("breakglass recover talos -n 10.0.0.2,10.0.0.3,10.0.0.4 --dry-run",
         "breakglass recover talos --config-file clusters/prod/controlplane.yaml --write-patch bg.yaml"),
        disables_plugins=True, cost="every webhook off until reverted; no reboot (--mode=no-reboot)"),
    Way("kubeadm", 4, "Disable the webhook admission plugins in every node's kube-apiserver manifest.",
        _FLAG_TRADEOFF + ".",
        (Variant("ssh", "over SSH", "ssh"), Variant("local", "in a manifest on this machine", "manifest")),
        PLUGINS + SSH + (
            Opt("manifest", "str", None, "Edit this local manifest instead (you are on the node)."),
            Opt("manifest_path", "str", "/etc/kubernetes/manifests/kube-apiserver.yaml",
                "The manifest's path on the nodes.")) + NODE_WAIT + WAIT + TIMEOUT,
        ("breakglass recover kubeadm --ssh cp1,cp2,cp3 --dry-run",
         "sudo breakglass recover kubeadm --manifest /etc/kubernetes/manifests/kube-apiserver.yaml"),
        disables_plugins=True, distro="kubeadm", cost="every webhook off until reverted; the kubelet restarts "
                                                       "kube-apiserver"),
    Way("k3s", 5, "Disable the webhook admission plugins in a drop-in of every k3s server's config, then restart k3s.",
        _FLAG_TRADEOFF + "; k3s restarts.",
        (Variant("ssh", "over SSH", "ssh"), Variant("file", "in a config.yaml here (no restart)", "k3s-file",
                                                    _FLAG_TRADEOFF + "; nothing restarts: k3s reads it when you "
                                                                     "restart it.")),
        PLUGINS + SSH + (
            Opt("config_file", "list", None, "Edit this config.yaml (and its config.yaml.d/) here, with no restart: "
                "edited, not applied (exit 8)."),
            Opt("config_path", "str", None, "config.yaml's path on the nodes (default /etc/rancher/k3s/config.yaml)."),
            Opt("drop_in_dir", "str", None, "The drop-in directory k3s reads (default: the config's path + .d).")
        ) + NODE_WAIT + WAIT + TIMEOUT,
        ("breakglass recover k3s --ssh cp1,cp2,cp3 --dry-run",),
        disables_plugins=True, distro="k3s", cost="every webhook off until reverted; k3s restarts"),
    Way("rke2", 6, "Disable the webhook admission plugins in a drop-in of every RKE2 server's config, then restart "
        "rke2-server.", _FLAG_TRADEOFF + "; rke2-server restarts.",
        (Variant("ssh", "over SSH", "ssh"), Variant("file", "in a config.yaml here (no restart)", "k3s-file",
                                                    _FLAG_TRADEOFF + "; nothing restarts: RKE2 reads it when you "
                                                                     "restart rke2-server.")),
        PLUGINS + SSH + (
            Opt("config_file", "list", None, "Edit this config.yaml (and its config.yaml.d/) here, with no restart: "
                "edited, not applied (exit 8)."),
            Opt("config_path", "str", None, "config.yaml's path on the nodes (default /etc/rancher/rke2/config.yaml)."),
            Opt("drop_in_dir", "str", None, "The drop-in directory RKE2 reads (default: the config's path + .d).")
        ) + NODE_WAIT + WAIT + TIMEOUT,
        ("breakglass recover rke2 --ssh cp1,cp2,cp3 --dry-run",),
        disables_plugins=True, distro="rke2", cost="every webhook off until reverted; rke2-server restarts"),
    Way("etcd", 7, "Delete the configuration's key from etcd after a verified backup.",
        "Surgical, but bypasses the apiserver and its audit log.",
        (Variant("etcd", "in etcd", "etcd"),),
        TARGETS + ETCD + SSH[1:] + TIMEOUT + (
            Opt("snapshot", "str", None, "First save a full etcd snapshot to this new file (checksummed)."),
            Opt("wait", "bool", True, "Wait for the apiserver's /readyz afterwards (without it: exit 8, not "
                "verified)."), WAIT[1],
            Opt("apiserver", "list", None, "apiserver URL(s) to wait on (default: the sandbox's, or port 6443 of "
                "the node whose etcd listens on 2379 or was reached through SSH).")),
        ("breakglass recover etcd -w kyverno-resource-validating-webhook-cfg --dry-run",
         "breakglass recover etcd -w validating/kyverno-resource-validating-webhook-cfg "
         "--etcd-endpoints https://127.0.0.1:2379 --etcd-cacert ca.crt --etcd-cert c.crt --etcd-key c.key"),
        cost="surgical, but bypasses the apiserver and its audit log"),
)
BY_NAME = {w.name: w for w in WAYS}
NAMES = tuple(w.name for w in WAYS)
FLAG_WAYS = tuple(w.name for w in WAYS if w.disables_plugins)

# The order of the ways out for each deadlock family (diagnose's Verdict.family), least invasive first.
# Conversion: the admission flag does not switch a CRD's conversion webhook off, so it is never offered.
ORDER = {None: NAMES, "conversion": ("kubeapi", "etcd")}
NOT_FOR = {"conversion": {m: "--disable-admission-plugins does not switch a CRD's conversion webhook off"
                          for m in FLAG_WAYS} | {"static-manifests": "a conversion webhook is not an admission one"}}


def get(name: str) -> Way:
    from breakglass.core.errors import BadInput  # noqa: PLC0415

    try:
        return BY_NAME[name]
    except KeyError:
        raise BadInput(f"unknown way out {name!r} (use {', '.join(NAMES)})") from None


def order_for(family: str | None) -> tuple[str, ...]:
    first = ORDER.get(family, NAMES)
    return first + tuple(n for n in NAMES if n not in first)


@dataclass
class Probe:
    name: str  # apiserver | talos | ssh | etcd | talos-file | manifest | k3s-file
    reachable: bool
    detail: str
    distro: str | None = None  # k3s-file: whose config it is (k3s or rke2), when the file tells (k3s.which)


@dataclass
class Reach:
    """What the engineer gave to reach the cluster, as the ways out see it (the planner probes it)."""

    kubeconfig: str | None = None
    context: str | None = None
    talos: object | None = None  # access.talos.Talos
    talos_nodes: list = field(default_factory=list)
    ssh_nodes: dict = field(default_factory=dict)  # host -> access.ssh.Node
    etcd: object | None = None  # ways.etcd_target.EtcdTarget
    wants_kubeconfig: bool = False
    talos_files: list = field(default_factory=list)  # machine-config files managed as code
    manifest: str | None = None  # a kubeadm manifest on this machine
    k3s_files: list = field(default_factory=list)  # a k3s/RKE2 config.yaml here
    readyz_urls: list = field(default_factory=list)  # apiservers to watch afterwards
    static_dir: str | None = None  # a staticManifestsDir on this machine (on the node itself)
    distros: dict = field(default_factory=dict)  # host -> access.distro.Distro, found by the SSH probe

    def local_probes(self) -> dict:
        """Ways out through files on this machine: nothing to reach, only to read and write."""
        out = {}
        for name, files, what in (("talos-file", self.talos_files, "machine-config file(s)"),
                                  ("manifest", [self.manifest] if self.manifest else [], "kubeadm manifest"),
                                  ("k3s-file", self.k3s_files, "k3s/RKE2 config file(s)"),
                                  ("static-dir", [self.static_dir] if self.static_dir else [], "staticManifestsDir")):
            if files:
                ok = all(os.access(f, os.R_OK | os.W_OK) for f in files)
                out[name] = Probe(name, ok, f"{what} {', '.join(files)}" + ("" if ok else ": not writable here"))
        if self.k3s_files and out["k3s-file"].reachable:  # k3s' or RKE2's: only that way is offered, else both
            from breakglass.k3s import which  # noqa: PLC0415

            reading = which.read(self.k3s_files[0])
            out["k3s-file"] = Probe("k3s-file", True, reading.line(), reading.name)
        return out


def _other_distribution(way: Way, distros: dict) -> str:
    """Why a node way out does not fit the nodes, when the SSH probe found what they run ("" when it fits, or
    nothing is known): kubeadm's manifest is not k3s' config, and so on."""
    if way.distro is None or not distros:
        return ""
    known = [d for d in distros.values() if d.name != "unknown"]
    if not known or any(d.name == way.distro for d in known):
        return ""
    return "; ".join(d.summary() for d in known)


def _no_access(way: Way) -> str:
    needs = {"apiserver": "apiserver", "talos": "talos", "talos-file": "talos", "ssh": "ssh", "manifest": "ssh",
             "k3s-file": "ssh", "etcd": "etcd", "static-dir": "ssh"}
    return f"no {needs[way.variants[0].needs]} access given"


def assess(way: Way, probes: dict, family: str | None = None, distros: dict | None = None,
           have_targets: bool = True, static: bool = False) -> Verdict:
    """Can ``way`` act with what answered (``probes``, local files included), and through which variant?
    ``static``: the culprits are manifest-based configurations (files on the nodes, not in the API or etcd)."""
    if way.static_only and not static:
        return Verdict(way, None, "only for a manifest-based configuration (NAME.static.k8s.io): none is named")
    if static and way.name in ("kubeapi", "etcd"):
        return Verdict(way, None, "a manifest-based configuration is neither served by the API nor kept in etcd")
    if way.name in NOT_FOR.get(family or "", {}):
        return Verdict(way, None, NOT_FOR[family][way.name])
    given = [(v, probes[v.needs]) for v in way.variants if v.needs in probes]
    if not given:
        return Verdict(way, None, _no_access(way))
    answering = [(v, p) for v, p in given if p.reachable]
    if not answering:
        return Verdict(way, None, given[0][1].detail)
    variant, probe = answering[0]
    if variant.needs == "k3s-file" and probe.distro and way.distro and probe.distro != way.distro:
        owned = {"k3s": "k3s'", "rke2": "RKE2's"}
        return Verdict(way, None, f"the file is {owned[probe.distro]} config, not {owned[way.distro]}: "
                                  f"{probe.detail}")
    if variant.needs == "ssh":
        other = _other_distribution(way, distros or {})
        if other:
            return Verdict(way, None, other)
    if way.name in ("kubeapi", "etcd") and not have_targets:
        return Verdict(way, None, "no configuration named (diagnose logs first)")
    return Verdict(way, variant)


def assess_all(probes: dict, family: str | None = None, distros: dict | None = None,
               have_targets: bool = True, static: bool = False) -> list[Verdict]:
    """Every way out, in the family's order, each usable (with its variant) or not (with the reason)."""
    return [assess(BY_NAME[n], probes, family, distros, have_targets, static) for n in order_for(family)]
