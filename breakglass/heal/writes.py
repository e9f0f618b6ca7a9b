"""The heal model: the writes each actor must make for a cluster to come back after a restart or an upgrade.

Data with sources. Each entry names one admission-visible write (group, resource, subresource, the admission
operations it arrives as, where it lands), who makes it, what breaks while a webhook refuses it, how bad that is,
the Kubernetes minors it applies to, and the file in kubernetes/kubernetes it comes from. ``audit`` matches
webhooks' rules against it; ``diagnose`` uses it to tell a deadlock (the blocked write is on the path back to the
webhook's own backend) from an outage that heals when the backend returns.

How a write reaches admission: a PATCH or PUT is an UPDATE, a subresource is matched as ``resource/subresource``
(``pods/binding`` is a CREATE, ``nodes/status`` an UPDATE). Written by the loopback client, kube-apiserver's own
writes come as user ``system:apiserver``. Namespaces: ``()`` for cluster-scoped resources, ``BACKEND`` for the
namespace of the webhook's own Service (its pods, their ReplicaSet, its EndpointSlices).

Severities (what a fail-closed webhook with its backend down costs): critical, the cluster cannot come back at
all (the apiserver stays not ready, every node goes NotReady, nothing is scheduled, controllers stop); high, a
part of it cannot (system pods, the webhook's own backend, new nodes); medium and low, features degrade.
"""

from __future__ import annotations

from dataclasses import dataclass

from breakglass.heal import bootstrap

BACKEND = "<backend>"  # the webhook's own Service's namespace
OLDEST, NEWEST = (1, 28), (1, 37)  # the minors breakglass supports (the model's claims are checked for these)
SEVERITIES = ("info", "low", "medium", "high", "critical")

APISERVER, KUBELET, SCHEDULER, KCM = "kube-apiserver", "kubelet", "kube-scheduler", "kube-controller-manager"
ADDONS, BACKEND_ACTOR, OPERATORS, KUBEADM = ("kube-system add-ons (CNI, kube-proxy, DNS)", "the webhook's backend",
                                            "operators and CNIs", "kubeadm")
DELEGATED = "kubelets and aggregated apiservers (delegated authentication and authorization)"
CCM = "cloud-controller-manager"
# the user each actor writes as, for matchConditions and for reading audit events
USERS = {APISERVER: "system:apiserver", KUBELET: "system:node:<node>", SCHEDULER: "system:kube-scheduler",
         KCM: "system:kube-controller-manager or system:serviceaccount:kube-system:<controller>"}


@dataclass(frozen=True)
class Write:
    id: str
    actor: str
    kind: str
    group: str  # "" for the core group
    resource: str
    subresource: str
    operations: tuple[str, ...]  # as admission sees them: CREATE, UPDATE, DELETE
    namespaces: tuple[str, ...]  # () cluster-scoped; BACKEND: the webhook's own namespace
    breaks: str  # what breaks while it is refused
    severity: str
    source: str  # path in kubernetes/kubernetes
    since: tuple[int, int] = OLDEST
    until: tuple[int, int] | None = None  # last minor it applies to, None: still
    readiness: str | None = None  # the /readyz check that waits for it
    names: tuple[str, ...] = ()  # fixed object names, when there are
    labels: tuple[tuple[str, str], ...] = ()  # labels the object carries (what an objectSelector sees)
    every_start: bool = True  # written on every start (or renewal), not only when missing
    versions: tuple[str, ...] = ("v1",)  # the API versions the writer sends (all that matchPolicy Exact sees)
    admission: bool = True  # False: not an admission write (CRD conversion), never matched against rules

    @property
    def cluster_scoped(self) -> bool:
        return not self.namespaces

    @property
    def qualified(self) -> str:
        res = self.resource + (f"/{self.subresource}" if self.subresource else "")
        return f"{res}.{self.group}" if self.group else res

    @property
    def by_apiserver(self) -> bool:
        return self.actor == APISERVER

    def applies(self, version: tuple[int, int] | None) -> bool:
        if version is None:
            return True
        return self.since <= version and (self.until is None or version <= self.until)

    def where(self, backend_ns: str | None = None) -> tuple[str, ...]:
        """The namespaces the write lands in, BACKEND replaced by the webhook's (none when it has no Service)."""
        out = []
        for ns in self.namespaces:
            if ns == BACKEND:
                if backend_ns:
                    out.append(backend_ns)
            else:
                out.append(ns)
        return tuple(dict.fromkeys(out))

    def describe(self) -> str:
        ns = ", ".join(self.namespaces).replace(BACKEND, "its backend's namespace")
        return (f"{'/'.join(self.operations)} {self.kind}" + (f" {self.subresource}" if self.subresource else "")
                + (f" {'/'.join(self.names)}" if self.names and len(self.names) <= 2 else "")
                + (f" in {ns}" if ns else ""))


def _from_bootstrap(k: bootstrap.BootstrapKind, wid: str, ops, breaks: str, severity: str, source: str,
                    readiness: str | None = None) -> Write:
    return Write(wid, APISERVER, k.kind, k.group, k.resource, "", ops, k.namespaces, breaks, severity, source,
                 since=max(OLDEST, k.since),
                 readiness=readiness or (f"poststarthook/{k.hook}" if k.blocks_readiness else None),
                 names=k.names, labels=k.labels,
                 every_start=k.every_start)


_B = {(k.kind, k.namespaces): k for k in bootstrap.BOOTSTRAP_KINDS}
_CU = ("CREATE", "UPDATE")
_NOT_READY = "kube-apiserver never becomes ready; nothing else can come back"

WRITES: tuple[Write, ...] = (
    # -- kube-apiserver's post-start hooks (its /readyz lists each as poststarthook/<name>) ------------------------
    _from_bootstrap(_B["ServiceCIDR", ()], "apiserver-servicecidr", ("CREATE", "UPDATE"),
                    _NOT_READY + " (the Service IP allocators need the default ServiceCIDR)", "critical",
                    "pkg/controlplane/controller/defaultservicecidr/default_servicecidr_controller.go",
                    "poststarthook/start-kubernetes-service-cidr-controller"),
    _from_bootstrap(_B["IPAddress", ()], "apiserver-ipaddress", ("CREATE",),
                    _NOT_READY + " (the IP repair controller must allocate every Service's ClusterIP)", "critical",
                    "pkg/registry/core/service/ipallocator/controller/repairip.go",
                    "poststarthook/start-service-ip-repair-controllers"),
    _from_bootstrap(_B["ClusterRole", ()], "apiserver-clusterroles", _CU,
                    _NOT_READY + "; the hook gives up after 30 s and the apiserver exits",
                    "critical", "pkg/registry/rbac/rest/storage_rbac.go", "poststarthook/rbac/bootstrap-roles"),
    _from_bootstrap(_B["ClusterRoleBinding", ()], "apiserver-clusterrolebindings", _CU,
                    _NOT_READY + "; the hook gives up after 30 s and the apiserver exits",
                    "critical", "pkg/registry/rbac/rest/storage_rbac.go", "poststarthook/rbac/bootstrap-roles"),
    _from_bootstrap(_B["Role", ("kube-system", "kube-public")], "apiserver-roles", _CU,
                    _NOT_READY + "; the hook gives up after 30 s and the apiserver exits",
                    "critical", "pkg/registry/rbac/rest/storage_rbac.go", "poststarthook/rbac/bootstrap-roles"),
    _from_bootstrap(_B["RoleBinding", ("kube-system", "kube-public")], "apiserver-rolebindings", _CU,
                    _NOT_READY + "; the hook gives up after 30 s and the apiserver exits",
                    "critical", "pkg/registry/rbac/rest/storage_rbac.go", "poststarthook/rbac/bootstrap-roles"),
    _from_bootstrap(_B["PriorityClass", ()], "apiserver-priorityclasses", ("CREATE",),
                    "kube-apiserver exits at start (any error but 503 aborts the hook) when the system "
                    "PriorityClasses are missing", "high", "pkg/registry/scheduling/rest/storage_scheduling.go",
                    "poststarthook/scheduling/bootstrap-system-priority-classes"),
    _from_bootstrap(_B["FlowSchema", ()], "apiserver-flowschemas", _CU,
                    _NOT_READY + " (API priority and fairness has no configuration)", "critical",
                    "pkg/registry/flowcontrol/rest/storage_flowcontrol.go",
                    "poststarthook/priority-and-fairness-config-producer"),
    _from_bootstrap(_B["PriorityLevelConfiguration", ()], "apiserver-prioritylevels", _CU,
                    _NOT_READY + " (API priority and fairness has no configuration)", "critical",
                    "pkg/registry/flowcontrol/rest/storage_flowcontrol.go",
                    "poststarthook/priority-and-fairness-config-producer"),
    _from_bootstrap(_B["Namespace", ()], "apiserver-system-namespaces", ("CREATE",),
                    "kube-system, kube-public, kube-node-lease or default, when missing, are never made: nothing "
                    "can be written there", "high", "pkg/controlplane/controller/systemnamespaces/"
                    "system_namespaces_controller.go"),
    _from_bootstrap(_B["ConfigMap", ("kube-system",)], "apiserver-auth-configmap", _CU,
                    _NOT_READY + " (extension apiservers and webhooks cannot authenticate it)", "critical",
                    "pkg/controlplane/controller/clusterauthenticationtrust/cluster_authentication_trust_controller.go",
                    "poststarthook/start-cluster-authentication-info-controller"),
    Write("apiserver-legacy-token-configmap", APISERVER, "ConfigMap", "", "configmaps", "", ("CREATE",),
          ("kube-system",), "the legacy token tracking date is not recorded (cleanup of old tokens waits)", "low",
          "pkg/controlplane/controller/legacytokentracking/controller.go",
          names=("kube-apiserver-legacy-service-account-token-tracking",), every_start=False),
    Write("apiserver-identity-lease", APISERVER, "Lease", "coordination.k8s.io", "leases", "", _CU, ("kube-system",),
          "the apiserver's identity lease expires: storage version migration and peer proxying lose it", "medium",
          "pkg/controlplane/apiserver/server.go (start-kube-apiserver-identity-lease-controller)",
          labels=(("apiserver.kubernetes.io/identity", "kube-apiserver"),)),
    Write("apiserver-kubernetes-service", APISERVER, "Service", "", "services", "", _CU, ("default",),
          "the default/kubernetes Service is not kept: in-cluster clients lose the apiserver", "high",
          "pkg/controlplane/controller/kubernetesservice/controller.go", names=("kubernetes",),
          labels=(("component", "apiserver"), ("provider", "kubernetes"))),
    Write("apiserver-kubernetes-endpoints", APISERVER, "Endpoints", "", "endpoints", "", _CU, ("default",),
          "default/kubernetes has no endpoints: in-cluster clients (the webhook's backend too) cannot reach "
          "the apiserver", "high", "pkg/controlplane/reconcilers/lease.go", names=("kubernetes",),
          labels=(("endpointslice.kubernetes.io/skip-mirror", "true"),)),
    Write("apiserver-kubernetes-endpointslice", APISERVER, "EndpointSlice", "discovery.k8s.io", "endpointslices", "",
          _CU, ("default",), "default/kubernetes has no EndpointSlice: kube-proxy cannot route to the apiserver",
          "high", "pkg/controlplane/reconcilers/endpointsadapter.go", names=("kubernetes",)),
    Write("apiserver-apiservices", APISERVER, "APIService", "apiregistration.k8s.io", "apiservices", "", _CU, (),
          "kube-apiserver never becomes ready: autoregister-completion waits for the APIService of every built-in "
          "group version; written when missing or changed (a new cluster, an upgrade's new group versions)", "high",
          "staging/src/k8s.io/kube-aggregator/pkg/controllers/autoregister/autoregister_controller.go",
          readiness="autoregister-completion", every_start=False),
    Write("apiserver-apiservices-status", APISERVER, "APIService", "apiregistration.k8s.io", "apiservices", "status",
          ("UPDATE",), (), "APIServices stay Available=False: discovery and aggregated APIs (metrics) fail", "high",
          "staging/src/k8s.io/kube-aggregator/pkg/controllers/status/local/local_available_controller.go"),
    Write("apiserver-crd-status", APISERVER, "CustomResourceDefinition", "apiextensions.k8s.io",
          "customresourcedefinitions", "status", ("UPDATE",), (),
          "new or changed CRDs never become Established: operators and CNIs that apply theirs at start wait",
          "high", "staging/src/k8s.io/apiextensions-apiserver/pkg/controller/establish/establishing_controller.go"),
    # -- the kubelet (every node, after every reboot) ----------------------------------------------------------------
    # tryRegisterWithAPIServer creates the Node on every kubelet start and reads AlreadyExists as registered: a
    # webhook refusing the CREATE answers before that, so the kubelet retries registration and updates no status.
    Write("kubelet-node-register", KUBELET, "Node", "", "nodes", "", ("CREATE",), (),
          "a restarted kubelet retries registration forever (its Node CREATE is refused before AlreadyExists) and "
          "updates no node status; a new or rebuilt node cannot join", "high", "pkg/kubelet/kubelet_node_status.go"),
    Write("kubelet-node-update", KUBELET, "Node", "", "nodes", "", ("UPDATE",), (),
          "the kubelet cannot reconcile its Node's labels and annotations at registration", "medium",
          "pkg/kubelet/kubelet_node_status.go"),
    Write("kubelet-node-status", KUBELET, "Node", "", "nodes", "status", ("UPDATE",), (),
          "no Ready condition: nodes go NotReady and their pods (the webhook's backend too) are evicted",
          "critical", "pkg/kubelet/kubelet_node_status.go"),
    Write("kubelet-node-lease", KUBELET, "Lease", "coordination.k8s.io", "leases", "", _CU, ("kube-node-lease",),
          "node heartbeats stop (renewed every 10 s, 40 s lease): every node goes NotReady and its pods are "
          "evicted", "critical", "pkg/kubelet/kubelet.go (nodeLeaseRenewIntervalFraction), "
          "staging/src/k8s.io/component-helpers/apimachinery/lease/controller.go"),
    Write("kubelet-csr", KUBELET, "CertificateSigningRequest", "certificates.k8s.io", "certificatesigningrequests",
          "", ("CREATE",), (), "TLS bootstrap and certificate rotation fail: new nodes cannot join; existing "
          "kubelets keep their client certificates only until they expire (a year by default), then go "
          "NotReady", "medium", "pkg/kubelet/certificate/bootstrap/bootstrap.go",
          every_start=False),
    Write("kubelet-pod-status", KUBELET, "Pod", "", "pods", "status", ("UPDATE",), ("kube-system", BACKEND),
          "pods never become Ready: the webhook's replacement pods get no endpoints, kube-system pods stay "
          "unready", "high", "pkg/kubelet/status/status_manager.go"),
    Write("kubelet-mirror-pods", KUBELET, "Pod", "", "pods", "", ("CREATE", "DELETE"), ("kube-system",),
          "static control-plane pods (kube-apiserver, etcd, the scheduler, kube-controller-manager) get no mirror "
          "pod: invisible to the API and to kubectl", "medium", "pkg/kubelet/pod/mirror_client.go"),
    Write("kubelet-sa-token", KUBELET, "ServiceAccount", "", "serviceaccounts", "token", ("CREATE",),
          ("kube-system", BACKEND), "no projected service account token: system pods and the webhook's own pods "
          "cannot start", "critical", "pkg/kubelet/token/token_manager.go"),
    Write("kubelet-csinode", KUBELET, "CSINode", "storage.k8s.io", "csinodes", "", _CU, (),
          "CSI drivers do not register on the node: pods with CSI volumes cannot start there", "low",
          "pkg/volume/csi/nodeinfomanager/nodeinfomanager.go"),
    # -- kube-scheduler ----------------------------------------------------------------------------------------------
    Write("scheduler-binding", SCHEDULER, "Pod", "", "pods", "binding", ("CREATE",), ("kube-system", BACKEND),
          "pods are never bound to a node: nothing new runs (system pods, the webhook's backend)", "critical",
          "pkg/scheduler/framework/plugins/defaultbinder/default_binder.go"),
    Write("scheduler-lease", SCHEDULER, "Lease", "coordination.k8s.io", "leases", "", _CU, ("kube-system",),
          "the scheduler cannot renew its leader Lease (10 s renew deadline): it exits and nothing is scheduled",
          "critical", "staging/src/k8s.io/client-go/tools/leaderelection/leaderelection.go",
          names=("kube-scheduler",)),
    # -- kube-controller-manager ------------------------------------------------------------------------------------
    Write("kcm-lease", KCM, "Lease", "coordination.k8s.io", "leases", "", _CU, ("kube-system",),
          "kube-controller-manager cannot renew its leader Lease (10 s renew deadline): it exits, no controller "
          "runs", "critical", "staging/src/k8s.io/client-go/tools/leaderelection/leaderelection.go",
          names=("kube-controller-manager", "cloud-controller-manager")),
    Write("kcm-system-pods", KCM, "Pod", "", "pods", "", ("CREATE",), ("kube-system",),
          "DaemonSet and Deployment pods in kube-system (CNI, kube-proxy, DNS) are not created on new or rebooted "
          "nodes", "high", "pkg/controller/controller_utils.go (RealPodControl), pkg/controller/daemon/"
          "daemon_controller.go"),
    Write("kcm-backend-pods", KCM, "Pod", "", "pods", "", ("CREATE",), (BACKEND,),
          "the webhook's own pods are not recreated: its backend cannot come back (self-dependency)", "high",
          "pkg/controller/replicaset/replica_set.go"),
    Write("kcm-backend-replicasets", KCM, "ReplicaSet", "apps", "replicasets", "", _CU, (BACKEND,),
          "the webhook's Deployment cannot roll out or scale its ReplicaSet", "high",
          "pkg/controller/deployment/sync.go"),
    Write("kcm-endpointslices", KCM, "EndpointSlice", "discovery.k8s.io", "endpointslices", "", _CU,
          ("kube-system", BACKEND), "Services get no endpoints: the webhook's Service and kube-dns stay empty "
          "even with pods running", "high", "staging/src/k8s.io/endpointslice/reconciler.go"),
    Write("kcm-endpoints", KCM, "Endpoints", "", "endpoints", "", _CU, ("kube-system", BACKEND),
          "Endpoints stay empty: the apiserver's service resolver before 1.33 (and aggregator routing) finds no "
          "endpoint for the webhook", "medium", "pkg/controller/endpoint/endpoints_controller.go"),
    Write("kcm-node-lifecycle", KCM, "Node", "", "nodes", "", ("UPDATE",), (),
          "node taints are not kept: NotReady nodes are not tainted, recovered ones not untainted", "high",
          "pkg/controller/nodelifecycle/node_lifecycle_controller.go"),
    Write("kcm-csr-approval", KCM, "CertificateSigningRequest", "certificates.k8s.io", "certificatesigningrequests",
          "approval", ("UPDATE",), (), "kubelet CSRs are not approved: new nodes cannot join, rotation fails", "medium",
          "pkg/controller/certificates/approver/sarapprove.go"),
    Write("kcm-csr-status", KCM, "CertificateSigningRequest", "certificates.k8s.io", "certificatesigningrequests",
          "status", ("UPDATE",), (), "approved CSRs are not signed: new nodes cannot join, rotation fails", "medium",
          "pkg/controller/certificates/signer/signer.go"),
    Write("kcm-daemonset-status", KCM, "DaemonSet", "apps", "daemonsets", "status", ("UPDATE",), ("kube-system",),
          "kube-system DaemonSets' status is stale: a rollout of the CNI or kube-proxy never completes",
          "medium",
          "pkg/controller/daemon/daemon_controller.go"),
    Write("kcm-replicaset-status", KCM, "ReplicaSet", "apps", "replicasets", "status", ("UPDATE",),
          ("kube-system", BACKEND), "ReplicaSets' status is stale: the Deployment controller cannot tell how many "
          "pods are available, so a rollout of CoreDNS or of the webhook's own Deployment stalls", "medium",
          "pkg/controller/replicaset/replica_set_utils.go (updateReplicaSetStatus)"),
    Write("kcm-controllerrevisions", KCM, "ControllerRevision", "apps", "controllerrevisions", "", _CU + ("DELETE",),
          ("kube-system", BACKEND), "the DaemonSet controller cannot record a new template's revision: it stops "
          "syncing that DaemonSet (constructHistory fails first), so a changed CNI or kube-proxy DaemonSet makes "
          "no pods", "medium", "pkg/controller/daemon/update.go (constructHistory)", every_start=False),
    Write("kcm-controller-serviceaccounts", KCM, "ServiceAccount", "", "serviceaccounts", "", ("CREATE",),
          ("kube-system",), "with --use-service-account-credentials (kubeadm's default) each controller of "
          "kube-controller-manager runs as kube-system/<controller>, created when missing: a missing one is "
          "never made and that controller does not run", "high",
          "staging/src/k8s.io/controller-manager/pkg/clientbuilder/client_builder_dynamic.go", every_start=False),
    Write("kcm-scale", KCM, "Deployment", "apps", "deployments", "scale", ("UPDATE",), ("kube-system", BACKEND),
          "the HorizontalPodAutoscaler (and kube-system's DNS autoscaler) cannot scale: DNS and the webhook's "
          "backend stay at their replica count under load", "medium",
          "pkg/controller/podautoscaler/horizontal.go; kubernetes-sigs/cluster-proportional-autoscaler"),
    Write("kcm-replicaset-scale", KCM, "ReplicaSet", "apps", "replicasets", "scale", ("UPDATE",),
          ("kube-system", BACKEND), "a HorizontalPodAutoscaler on a ReplicaSet cannot scale it", "low",
          "pkg/controller/podautoscaler/horizontal.go"),
    Write("ccm-service-status", CCM, "Service", "", "services", "status", ("UPDATE",), ("kube-system", BACKEND),
          "a LoadBalancer Service's address is never written back: what the cluster reaches through a cloud load "
          "balancer in kube-system (Gardener's vpn-shoot tunnel, an ingress controller, a webhook's own backend "
          "exposed that way) has no address, and the service controller retries forever", "medium",
          "staging/src/k8s.io/cloud-provider/controllers/service/controller.go (patchStatus)"),
    # -- add-ons that must come back first ---------------------------------------------------------------------------
    Write("cni-node-annotate", ADDONS, "Node", "", "nodes", "", ("UPDATE",), (),
          "the CNI agent cannot annotate its Node (Calico, Flannel, Canal): no pod network on that node",
          "high", "not in kubernetes/kubernetes: flannel pkg/subnet/kube/kube.go, calico node startup"),
    Write("addon-crds", OPERATORS, "CustomResourceDefinition", "apiextensions.k8s.io", "customresourcedefinitions",
          "", _CU, (), "CNIs and operators that apply their CRDs at start (Calico, Cilium) cannot install or upgrade "
          "them, and an operator that waits for its CRD does not start; where the CRD already exists it keeps "
          "serving", "medium",
          "staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition/strategy.go"),
    Write("addon-workloads", ADDONS, "DaemonSet", "apps", "daemonsets", "", _CU, ("kube-system",),
          "kube-system's DaemonSets (CNI, kube-proxy, CSI node plugins) cannot be upgraded or repaired: `kubeadm "
          "upgrade apply` fails at its add-on phase, add-on operators cannot reconcile them", "medium",
          "cmd/kubeadm/app/phases/addons/proxy/proxy.go", every_start=False),
    Write("addon-deployments", ADDONS, "Deployment", "apps", "deployments", "", _CU, ("kube-system",),
          "kube-system's Deployments (CoreDNS, metrics-server, CNI operators) cannot be upgraded or repaired", "medium",
          "cmd/kubeadm/app/phases/addons/dns/dns.go", every_start=False),
    Write("addon-secrets", ADDONS, "Secret", "", "secrets", "", _CU + ("DELETE",), ("kube-system",),
          "Secrets in kube-system cannot be written: kubeadm's uploaded control-plane certificates (kubeadm-certs, "
          "for joining control-plane nodes), add-ons' rotated keys and certificates (CNI, CSI), and the token "
          "cleaner's removal of expired bootstrap tokens", "medium",
          "cmd/kubeadm/app/phases/copycerts/copycerts.go; pkg/controller/bootstrap/tokencleaner.go",
          every_start=False),
    Write("addon-network-policies", ADDONS, "NetworkPolicy", "networking.k8s.io", "networkpolicies", "", _CU,
          ("kube-system",), "the NetworkPolicies shipped with kube-system components (Gardener's resource manager, "
          "add-on charts under a default-deny) cannot be added or changed: a new or upgraded component's traffic "
          "stays blocked by the old policy", "medium",
          "not in kubernetes/kubernetes: gardener pkg/resourcemanager; add-on charts' networkpolicy.yaml",
          every_start=False),
    Write("kubeadm-bootstrap-token", KUBEADM, "Secret", "", "secrets", "", ("CREATE",), ("kube-system",),
          "bootstrap tokens (kube-system/bootstrap-token-*) cannot be made: no node can join", "medium",
          "cmd/kubeadm/app/phases/bootstraptoken/node/token.go", every_start=False),
    # -- delegated authentication and authorization: the reviews the kubelet (webhook authn/authz, kubeadm's default)
    # and every aggregated apiserver (metrics-server, ...) create to serve a request. Not persisted, but they go
    # through admission until 1.36; from 1.37 (ExcludeAdmissionWebhookVirtualResources, beta, on by default) no
    # webhook is called for them (pkg/kubeapiserver/admission/exclusion/resources.go, generic/webhook.go Dispatch).
    Write("delegated-tokenreview", DELEGATED, "TokenReview", "authentication.k8s.io", "tokenreviews", "", ("CREATE",),
          (), "the kubelet's API (kubectl logs, exec, port-forward) and every aggregated API (metrics-server: HPA, "
          "kubectl top) refuse every caller; discovery of the aggregated APIs fails, which stalls namespace deletion "
          "and garbage collection", "high",
          "staging/src/k8s.io/apiserver/pkg/authentication/authenticatorfactory/delegating.go", until=(1, 36)),
    Write("delegated-subjectaccessreview", DELEGATED, "SubjectAccessReview", "authorization.k8s.io",
          "subjectaccessreviews", "", ("CREATE",), (), "the kubelet's API and every aggregated API cannot authorize a "
          "request: kubectl logs and exec, metrics, and the aggregated APIs' discovery fail", "high",
          "staging/src/k8s.io/apiserver/pkg/authorization/authorizerfactory/delegating.go", until=(1, 36)),
    # -- CRD conversion: not admission; a conversion webhook that is down fails reads and writes of the CR ---------
    Write("crd-conversion", OPERATORS, "custom resource", "*", "*", "", ("READ", "WRITE"), (BACKEND,),
          "every read and write of a non-storage version fails; an operator that lists its own resources to "
          "start cannot start (a self-dependency without any admission webhook)", "high",
          "staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/conversion/webhook_converter.go",
          admission=False),
)

BY_ID = {w.id: w for w in WRITES}
assert len(BY_ID) == len(WRITES), "duplicate write ids"


def for_version(version: tuple[int, int] | None = None, admission_only: bool = True) -> list[Write]:
    """The model's writes at a Kubernetes minor (None: every minor's)."""
    return [w for w in WRITES if w.applies(version) and (w.admission or not admission_only)]


def needed_for(resource: str, namespace: str | None, subresource: str = "", group: str | None = None,
               backend_ns: str | None = None, version: tuple[int, int] | None = None) -> list[Write]:
    """The model's writes a request to ``resource`` (plural, or a kind) in ``namespace`` is, for a webhook whose
    backend runs in ``backend_ns``."""
    r = resource.split(".", 1)[0].lower()
    out = []
    for w in for_version(version):
        if r not in (w.resource, w.kind.lower()) or (group is not None and group != w.group):
            continue
        if subresource != w.subresource:
            continue
        if w.namespaces and namespace not in w.where(backend_ns):
            continue
        out.append(w)
    return out


def rank(severity: str) -> int:
    return SEVERITIES.index(severity)
