#!/usr/bin/env python3
"""Checks that tessera's deployment (deploy/) parses and is consistent with itself and with
the request forms the model accepts.

    python3 tests/deploy/check_manifests.py [REPO_ROOT]

Prints one line per check ("ok - ..." / "not ok - ..."), then "N passed, N failed", and
exits 1 if anything failed. Needs PyYAML (Debian: python3-yaml); without it, prints a
skip line and exits 0.

Hooked into `make test` by the Makefile, e.g.

    test: $(TEST_BIN)
    	@$(TEST_BIN)
    	@python3 tests/deploy/check_manifests.py

It also checks issue 11's "every share pod reaches tessera": each row of README.md's "Request
forms" table is built into a pod, sent through tessera's admission webhook (build/tessera-extender
--demo serves POST /webhook/mutate; skipped with a "# SKIP" line while that path answers 404), and
must make kube-scheduler call the extender under kube-scheduler's own rule (HTTPExtender.IsInterested)
and deploy/scheduler-config.yaml's managedResources; so must the README's instruction for clusters
without the webhook; a CPU-only pod must not.

It also checks issue 28's "everything deploy/ ships is admitted by the cluster it is installed in": every pod
deploy/ makes (the Deployment's, the node agent DaemonSet's, the sweep Job's, the examples, and the reservation
pods the extender creates at run time, taken from the real code by build/tessera-tests
deployed_pods_for_admission) against the Pod Security level of the namespace it lands in, with the API server's
own rules (tests/deploy/pod_security.py); every share pod the webhook changes against the level it met before;
and the cheap admission rules beside Pod Security (ServiceAccount, PriorityClass, RuntimeClass, ResourceQuota,
the RBAC the reservation pods need where they land).

What "consistent" means is spelled out in the constants below: when the extender gains
or renames a flag, a metric or an API permission, change them here together with deploy/.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("# SKIP deploy manifest checks: the python3 module yaml (PyYAML) is not installed "
          "(Debian/Ubuntu: apt-get install python3-yaml)")
    print("0 passed, 0 failed")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pod_security as pss  # noqa: E402  (the API server's Pod Security checks, beside this script)

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
EXAMPLES = os.path.join(DEPLOY, "examples")

NAMESPACE = "tessera"
SCHEDULER_NAME = "tessera-scheduler"
EXTENDER_IMAGE = "tessera-extender"          # image name in deployment.yaml (kustomize sets the real one)
KUBE_SCHEDULER_IMAGE = re.compile(r"^registry\.k8s\.io/kube-scheduler:v1\.30\.\d+$")
RUNTIME_UID = 65532

# Metric names tessera-extender exports and the dashboard may query. The lead
# cross-checks this list against the extender's /metrics.
EXTENDER_METRICS = {
    "tessera_request_duration_seconds": "histogram",   # label verb
    "tessera_gpu_memory_allocated_bytes": "gauge",     # labels node, gpu
    "tessera_gpu_memory_free_bytes": "gauge",          # labels node, gpu
    "tessera_gpu_compute_allocated_ratio": "gauge",    # labels node, gpu
    "tessera_gpu_replicas_free": "gauge",              # labels node, gpu
    "tessera_mig_instances_free": "gauge",             # labels node, gpu, profile
    "tessera_cluster_fragmentation_ratio": "gauge",
    "tessera_binds_total": "counter",                  # label result
    "tessera_events_total": "counter",                 # label result: posted, failed, dropped
    "tessera_watch_restarts_total": "counter",         # label kind
    "tessera_watch_errors_total": "counter",           # label kind
    "tessera_cache_synced": "gauge",
    "tessera_leader": "gauge",                         # 1 on the replica holding the Lease
    "tessera_leader_transitions_total": "counter",
    "tessera_leader_lease_errors_total": "counter",    # label reason
    "tessera_reservations": "gauge",                   # label state
    "tessera_reservation_ops_total": "counter",        # labels op, result
    "tessera_namespace_gpu_milli": "gauge",            # label namespace (README, Quotas)
    "tessera_namespace_gpu_memory_mib": "gauge",       # label namespace
}

# Exactly what tessera-extender may do cluster-wide: (apiGroup, resource, resourceName|None) -> verbs.
WEBHOOK_CONFIG = "tessera"                   # MutatingWebhookConfiguration whose caBundle tessera patches
WEBHOOK_TLS_SECRET = "tessera-webhook-tls"
EXTENDER_CLUSTERROLE = {
    ("", "nodes", None): {"get", "list", "watch"},
    # patch: move a waiting share's assignment; delete: re-create a share no GPU could be reserved for
    ("", "pods", None): {"get", "list", "watch", "patch", "delete"},
    ("", "pods/binding", None): {"create"},
    ("", "events", None): {"create"},
    ("", "configmaps", None): {"create", "get", "update"},       # per-pod delivery ConfigMaps
    ("", "namespaces", None): {"get"},                           # an MPS share's Pod Security level (webhook)
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", WEBHOOK_CONFIG): {"get", "update", "patch"},
    # DRA (--dra, default on): read only
    ("resource.k8s.io", "resourceslices", None): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceclaims", None): {"get", "list", "watch"},
    ("resource.k8s.io", "deviceclasses", None): {"get", "list", "watch"},
}
# What tessera-extender may do in the tessera namespace only (Role tessera-extender).
EXTENDER_ROLE = {
    ("", "pods", None): {"create", "delete"},                      # reservation pods
    ("", "secrets", None): {"create"},
    ("", "secrets", WEBHOOK_TLS_SECRET): {"get", "update"},
}
# What tessera-extender may do in the MPS reservations' namespace (Role tessera-extender there, issue 27).
MPS_NAMESPACE = "tessera-node"
EXTENDER_MPS_ROLE = {("", "pods", None): {"create", "delete"}}
# Reservation pods (deploy/reservation.yaml, plan of issue 11).
RESERVE_SA = "tessera-reserve"
RESERVE_ROLE = {("", "pods", None): {"get", "patch"}}
RESERVE_PRIORITY_CLASS = "tessera-reservation"
RESERVE_PRIORITY = 1000000000                # the highest value a non-system PriorityClass may have
# The admission webhook (deploy/webhook.yaml, deploy/service.yaml).
WEBHOOK_NAME = "pods.tessera.io"
WEBHOOK_SERVICE = "tessera-extender"
WEBHOOK_PATH = "/webhook/mutate"
DELIVERY_MODES = ("reservation", "none")
# tessera-extender flags that change what its webhook adds to a pod (extender/main.c --help, "Admission webhook" and
# "Soft-share delivery"): the webhook checks below run the extender with the Deployment's values of these.
WEBHOOK_MUTATION_FLAGS = ("soft-share-delivery", "webhook-runtime-class", "scheduler-name")
MARKER = "tessera.io/share"              # the marker extended resource of annotation-only soft shares
# Leader election, in the tessera namespace: (apiGroup, resource, resourceName|None) -> verbs.
LEADER_LEASES = ("tessera-scheduler", "tessera-extender")
LEADER_ROLE = {("coordination.k8s.io", "leases", None): {"create"}}
for _l in LEADER_LEASES:
    LEADER_ROLE[("coordination.k8s.io", "leases", _l)] = {"get", "update"}
# Roles bound but not defined in deploy/ (Kubernetes' bootstrap roles): kind, name, namespace.
BUILTIN_ROLES = {
    ("ClusterRole", "system:kube-scheduler", None),
    ("ClusterRole", "system:volume-scheduler", None),
    ("Role", "extension-apiserver-authentication-reader", "kube-system"),
}
# Namespaced objects that must live outside the tessera namespace, and why.
NAMESPACE_EXCEPTIONS = {
    # next to the built-in Role it binds
    ("RoleBinding", "tessera-scheduler-extension-apiserver-authentication-reader"): "kube-system",
}
# Objects that exist in the tessera namespace and again, for the MPS reservations (privileged: root and hostPath
# for the GPU's MPS control daemon), in MPS_NAMESPACE.
MPS_NAMESPACE_OBJECTS = {("Role", "tessera-extender"), ("RoleBinding", "tessera-extender"),
                         ("ServiceAccount", RESERVE_SA), ("Role", RESERVE_SA), ("RoleBinding", RESERVE_SA)}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass", "MutatingWebhookConfiguration",
                  "CustomResourceDefinition", "StorageClass", "RuntimeClass", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding"}

ACCOUNTING = ("tessera.io/gpu-milli", "tessera.io/gpu-memory-mib")   # model/charge.h
# Request forms (model/request.h). ignoredByScheduler must be true exactly where nodes
# do not advertise the resource.
BASE_RESOURCES = {
    "nvidia.com/gpu": False,
    "nvidia.com/gpu.shared": False,
    "nvidia.com/gpumem": True,
    "nvidia.com/gpumem-percentage": True,
    "nvidia.com/gpucores": True,
    MARKER: True,
    # the accounting resources of every GPU pod (model/charge.h, README "Quotas")
    ACCOUNTING[0]: True,
    ACCOUNTING[1]: True,
}
MIG_PREFIX = "nvidia.com/mig-"
# managedResources must list every MIG profile of these catalog products.
REQUIRED_MIG_PRODUCTS = ("A100-SXM4-40GB", "A100-80GB", "H100-80GB", "H100-94GB")
# The annotation-only forms: a pod using one needs a managed resource too.
ANNOTATION_FORMS = ("tessera.io/gpu-fraction", "gpu-fraction", "gpu-memory")
# libgnutls30: the extender links GnuTLS itself (the webhook's certificates, --tls-client-ca).
RUNTIME_PACKAGES = {"libmicrohttpd12", "libcjson1", "libcurl4", "libjemalloc2", "libgnutls30", "ca-certificates"}
RESERVE_BIN = "/usr/local/bin/tessera-reserve"   # the reservation pods' command
AGENT_BIN = "/usr/local/bin/tessera-node-agent"  # the node agent DaemonSet's command (deploy/node-agent/)

passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - " + name + (": " + detail if detail else ""))
    return ok


def rel(path):
    return os.path.relpath(path, ROOT)


# ---- load ------------------------------------------------------------------------------
def yaml_files(top):
    out = []
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for f in sorted(files):
            if f.endswith((".yaml", ".yml")):
                out.append(os.path.join(d, f))
    return out


docs = {}  # path -> list of dict objects
for path in yaml_files(DEPLOY):
    try:
        with open(path) as fh:
            objs = [o for o in yaml.safe_load_all(fh) if o is not None]
        docs[path] = objs
        check("%s parses (%d document%s)" % (rel(path), len(objs), "" if len(objs) == 1 else "s"),
              len(objs) > 0 and all(isinstance(o, dict) for o in objs), "empty or not a mapping")
    except yaml.YAMLError as e:
        docs[path] = []
        check("%s parses" % rel(path), False, str(e).replace("\n", " "))

KUSTOMIZATION = os.path.join(DEPLOY, "kustomization.yaml")
top_manifests = sorted(p for p in docs if os.path.dirname(p) == DEPLOY and p != KUSTOMIZATION)
example_files = sorted(p for p in docs if os.path.dirname(p) == EXAMPLES)

for path in top_manifests + example_files:
    bad = [i for i, o in enumerate(docs[path])
           if not (o.get("apiVersion") and o.get("kind") and isinstance(o.get("metadata"), dict)
                   and o["metadata"].get("name"))]
    check("%s: every object has apiVersion, kind and metadata.name" % rel(path), not bad,
          "documents %s" % bad)

objects = [(p, o) for p in top_manifests for o in docs[p]]


def find(kind, name=None, ns=None):
    """Objects of kind (and name; and namespace ns, when given: some names exist in two namespaces)."""
    return [o for _, o in objects if o.get("kind") == kind and (name is None or o["metadata"].get("name") == name)
            and (ns is None or o["metadata"].get("namespace") == ns)]


def one(kind, name=None, ns=None):
    found = find(kind, name, ns)
    return found[0] if len(found) == 1 else None


# ---- namespaces ------------------------------------------------------------------------
ns_obj = one("Namespace", NAMESPACE)
check("namespace.yaml defines Namespace %s" % NAMESPACE, ns_obj is not None)
wrong = []
for p, o in objects:
    kind, meta = o.get("kind"), o.get("metadata", {})
    if kind in CLUSTER_SCOPED:
        if "namespace" in meta:
            wrong.append("%s/%s is cluster-scoped but names a namespace" % (kind, meta.get("name")))
        continue
    want = NAMESPACE_EXCEPTIONS.get((kind, meta.get("name")), NAMESPACE)
    if (kind, meta.get("name")) in MPS_NAMESPACE_OBJECTS and meta.get("namespace") == MPS_NAMESPACE:
        want = MPS_NAMESPACE
    if meta.get("namespace") != want:
        wrong.append("%s/%s in %r, want %r" % (kind, meta.get("name"), meta.get("namespace"), want))
missing_mps = sorted("%s/%s" % k for k in MPS_NAMESPACE_OBJECTS if not one(k[0], k[1], MPS_NAMESPACE))
check("the MPS reservations' namespace %s has the extender's Role and tessera-reserve's identity (%s)"
      % (MPS_NAMESPACE, ", ".join(sorted("%s/%s" % k for k in MPS_NAMESPACE_OBJECTS))), not missing_mps,
      "missing " + ", ".join(missing_mps))
check("namespaced objects are in namespace %s (exceptions: %s)" %
      (NAMESPACE, ", ".join("%s/%s" % k for k in NAMESPACE_EXCEPTIONS)), not wrong, "; ".join(wrong))

# ---- kustomization ---------------------------------------------------------------------
kust = (docs.get(KUSTOMIZATION) or [{}])[0]
listed = kust.get("resources") or []
listed_paths = sorted(os.path.normpath(os.path.join(DEPLOY, r)) for r in listed)
check("kustomization.yaml lists every manifest in deploy/ (%d files)" % len(top_manifests),
      listed_paths == top_manifests,
      "missing %s, extra %s" % ([rel(p) for p in top_manifests if p not in listed_paths],
                                [rel(p) for p in listed_paths if p not in top_manifests]))
missing_refs = [r for r in listed if not os.path.isfile(os.path.join(DEPLOY, r))]
check("everything kustomization.yaml references exists", not missing_refs, str(missing_refs))
check("kustomization.yaml sets no namespace (it would move the kube-system RoleBinding)",
      "namespace" not in kust)
check("kustomization.yaml sets the image %s" % EXTENDER_IMAGE,
      any(i.get("name") == EXTENDER_IMAGE and i.get("newName") for i in kust.get("images") or []))

# ---- deployment and its pod --------------------------------------------------------------
dep = one("Deployment")
check("exactly one Deployment", dep is not None)
dep = dep or {"metadata": {}, "spec": {"template": {"metadata": {}, "spec": {}}}}
tmpl = dep["spec"].get("template", {})
pod_labels = tmpl.get("metadata", {}).get("labels") or {}
pod = tmpl.get("spec", {})
containers = pod.get("containers") or []
inits = pod.get("initContainers") or []


def matches(selector, labels):
    ml = (selector or {}).get("matchLabels") or {}
    return bool(ml) and all(labels.get(k) == v for k, v in ml.items()) and not (selector or {}).get("matchExpressions")


check("Deployment has at least 2 replicas", (dep["spec"].get("replicas") or 1) >= 2)
check("Deployment selector matches its pod labels", matches(dep["spec"].get("selector"), pod_labels))
anti = (pod.get("affinity") or {}).get("podAntiAffinity") or {}
terms = [t.get("podAffinityTerm", t) for t in
         (anti.get("preferredDuringSchedulingIgnoredDuringExecution") or []) +
         (anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [])]
check("pod anti-affinity spreads replicas over nodes",
      any(t.get("topologyKey") == "kubernetes.io/hostname" and matches(t.get("labelSelector"), pod_labels)
          for t in terms))

extender = next((c for c in inits + containers if c.get("image", "").split(":")[0] == EXTENDER_IMAGE), None)
kubesched = next((c for c in containers if KUBE_SCHEDULER_IMAGE.match(c.get("image", ""))), None)
check("pod runs %s" % EXTENDER_IMAGE, extender is not None)
check("pod runs registry.k8s.io/kube-scheduler:v1.30.x", kubesched is not None,
      "images: %s" % [c.get("image") for c in containers])
extender = extender or {}
kubesched = kubesched or {}
if extender in inits:
    check("tessera-extender is a native sidecar (restartPolicy: Always) that starts before kube-scheduler",
          extender.get("restartPolicy") == "Always")


def flags(args):
    """--name value and --name=value into a dict."""
    out, i = {}, 0
    args = [str(a) for a in args or []]
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            if "=" in a:
                k, v = a[2:].split("=", 1)
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                k, v = a[2:], args[i + 1]
                i += 1
            else:
                k, v = a[2:], ""
            out[k] = v
        i += 1
    return out


def hostport(s):
    m = re.match(r"^\[?([^\]]*)\]?:(\d+)$", s or "")
    return (m.group(1), int(m.group(2))) if m else (None, None)


xf = flags((extender.get("command") or [])[1:] + (extender.get("args") or []))
listen_host, listen_port = hostport(xf.get("listen"))
mlisten_host, mlisten_port = hostport(xf.get("metrics-listen"))
check("extender --listen is on loopback", listen_host in ("127.0.0.1", "localhost", "::1"),
      "--listen %r" % xf.get("listen"))
check("extender --metrics-listen is on the pod IP and differs from --listen",
      mlisten_host in ("0.0.0.0", "", "::") and mlisten_port and mlisten_port != listen_port,
      "--metrics-listen %r" % xf.get("metrics-listen"))

policies = []
try:
    with open(os.path.join(ROOT, "policy", "score.c")) as fh:
        policies = re.findall(r'\{"([a-z0-9-]+)",\s*P_[A-Z]+', fh.read())
except OSError:
    pass
check("extender --policy names a policy of policy/score.c", xf.get("policy") in policies,
      "%r not in %s" % (xf.get("policy"), policies))


def port_number(container, port):
    if isinstance(port, int):
        return port
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return p.get("containerPort")
    return None


probe_ports, missing = {}, []
for kind, path in (("startupProbe", "/readyz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    pr = (extender.get(kind) or {}).get("httpGet")
    if extender in containers and kind == "startupProbe" and not pr:
        continue
    if not pr or pr.get("path") != path:
        missing.append("%s on %s" % (kind, path))
    else:
        probe_ports[kind] = port_number(extender, pr.get("port"))
check("extender probes: liveness on /healthz, readiness (and startup) on /readyz", not missing, ", ".join(missing))
check("extender probe ports are the --metrics-listen port %s" % mlisten_port,
      probe_ports and all(p == mlisten_port for p in probe_ports.values()), "probe ports %s" % probe_ports)
check("extender declares the metrics containerPort", port_number(extender, "metrics") == mlisten_port)

# Hardening of every container.
psc = pod.get("securityContext") or {}
for c in inits + containers:
    sc = c.get("securityContext") or {}
    problems = []
    if not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
        problems.append("runAsNonRoot")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append("readOnlyRootFilesystem")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        problems.append("capabilities.drop ALL")
    if (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        problems.append("seccomp RuntimeDefault")
    uid = sc.get("runAsUser", psc.get("runAsUser"))
    if uid in (None, 0):
        problems.append("runAsUser non-zero")
    check("container %s is hardened (non-root, read-only root, no privilege escalation, no capabilities, "
          "RuntimeDefault seccomp)" % c.get("name"), not problems, "missing " + ", ".join(problems))
    res = c.get("resources") or {}
    lack = ["%s.%s" % (s, r) for s in ("requests", "limits") for r in ("cpu", "memory")
            if r not in (res.get(s) or {})]
    check("container %s has CPU and memory requests and limits" % c.get("name"), not lack, "missing " + ", ".join(lack))
check("pod runs as uid %d like the image's USER" % RUNTIME_UID, psc.get("runAsUser") == RUNTIME_UID)

# ---- RBAC ------------------------------------------------------------------------------
sa_names = sorted(o["metadata"]["name"] for o in find("ServiceAccount", ns=NAMESPACE))
sa_name = pod.get("serviceAccountName")
check("two ServiceAccounts: the Deployment's and %s for reservation pods" % RESERVE_SA,
      len(sa_names) == 2 and sa_name in sa_names and RESERVE_SA in sa_names and sa_name != RESERVE_SA,
      "ServiceAccounts %s, serviceAccountName %r" % (sa_names, sa_name))

wild = []
for _, o in objects:
    if o.get("kind") in ("Role", "ClusterRole"):
        for r in o.get("rules") or []:
            for f in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                if any("*" in str(v) for v in r.get(f) or []):
                    wild.append("%s/%s %s" % (o["kind"], o["metadata"]["name"], f))
            if r.get("nonResourceURLs"):
                wild.append("%s/%s nonResourceURLs" % (o["kind"], o["metadata"]["name"]))
check("no Role or ClusterRole uses a wildcard or non-resource URL", not wild, "; ".join(wild))


def grants(role, with_names):
    out = {}
    for r in role.get("rules") or []:
        names = (r.get("resourceNames") or [None]) if with_names else [None]
        for g in r.get("apiGroups") or []:
            for res in r.get("resources") or []:
                for n in names:
                    key = (g, res, n) if with_names else (g, res)
                    out.setdefault(key, set()).update(r.get("verbs") or [])
    return out


def fmt_grants(g):
    return "; ".join("%s %s" % ("/".join(str(x) for x in k), ",".join(sorted(v))) for k, v in sorted(g.items(), key=str))


cr = one("ClusterRole", "tessera-extender") or {}
got = grants(cr, True)
check("ClusterRole tessera-extender grants exactly %s" % fmt_grants(EXTENDER_CLUSTERROLE),
      got == EXTENDER_CLUSTERROLE, "grants " + fmt_grants(got))
xr = one("Role", "tessera-extender", NAMESPACE) or {}
got = grants(xr, True)
check("Role tessera-extender (namespace %s) grants exactly %s" % (NAMESPACE, fmt_grants(EXTENDER_ROLE)),
      got == EXTENDER_ROLE and xr.get("metadata", {}).get("namespace") == NAMESPACE, "grants " + fmt_grants(got))
check("no ClusterRole grants secrets (the webhook's Secret is reached through the Role only)",
      all(("", "secrets") not in grants(o, False) for o in find("ClusterRole")))
xm = one("Role", "tessera-extender", MPS_NAMESPACE) or {}
got = grants(xm, True)
check("Role tessera-extender (namespace %s) grants exactly %s" % (MPS_NAMESPACE, fmt_grants(EXTENDER_MPS_ROLE)),
      got == EXTENDER_MPS_ROLE, "grants " + fmt_grants(got))
for ns_ in (NAMESPACE, MPS_NAMESPACE):
    rr = one("Role", RESERVE_SA, ns_) or {}
    got = grants(rr, True)
    check("Role %s (namespace %s) grants exactly pods get, patch" % (RESERVE_SA, ns_), got == RESERVE_ROLE,
          "grants " + fmt_grants(got))
check("nothing binds %s to a ClusterRole" % RESERVE_SA,
      not [b for b in find("ClusterRoleBinding") if any(x.get("name") == RESERVE_SA for x in b.get("subjects") or [])])

# Every rule of every Role and ClusterRole says why it is needed: a comment right above it.
uncommented = []
for path in top_manifests:
    try:
        with open(path) as fh:
            lines_ = fh.read().splitlines()
    except OSError:
        continue
    in_rules = False
    for i, line in enumerate(lines_):
        if line.startswith("rules:"):
            in_rules = True
            continue
        if in_rules and line and not line.startswith(("-", " ", "#")):
            in_rules = False
        if in_rules and line.startswith("- "):
            prev = next((l for l in reversed(lines_[:i]) if l.strip()), "")
            if not prev.lstrip().startswith("#"):
                uncommented.append("%s:%d" % (rel(path), i + 1))
check("every RBAC rule has a comment above it saying why", not uncommented, ", ".join(uncommented))

le = one("Role", "tessera-leader-election") or {}
got = grants(le, True)
check("Role tessera-leader-election grants exactly leases create, and get/update on %s" % ", ".join(LEADER_LEASES),
      got == LEADER_ROLE and le.get("metadata", {}).get("namespace") == NAMESPACE,
      "grants " + fmt_grants(got))
check("no ClusterRole defined here grants leases", all(
    ("coordination.k8s.io", "leases") not in grants(o, False) for o in find("ClusterRole")))

defined = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for _, o in objects
           if o.get("kind") in ("Role", "ClusterRole")}
bindings = find("RoleBinding") + find("ClusterRoleBinding")
bad = []
for b in bindings:
    name = b["metadata"]["name"]
    subs = b.get("subjects") or []
    want_sa = RESERVE_SA if (b.get("roleRef") or {}).get("name") == RESERVE_SA else sa_name
    # tessera-reserve's own binding names the ServiceAccount of its namespace; the extender's, tessera's
    want_ns = b["metadata"].get("namespace") if want_sa == RESERVE_SA else NAMESPACE
    if subs != [{"kind": "ServiceAccount", "name": want_sa, "namespace": want_ns}]:
        bad.append("%s subjects %s" % (name, subs))
    ref = b.get("roleRef") or {}
    ns = b["metadata"].get("namespace") if ref.get("kind") == "Role" else None
    key = (ref.get("kind"), ref.get("name"), ns)
    if key not in defined and key not in BUILTIN_ROLES:
        bad.append("%s refers to unknown %s" % (name, key))
check("every binding binds ServiceAccount %s/%s (%s for its own Role) to a role defined here or built in"
      % (NAMESPACE, sa_name, RESERVE_SA),
      bindings and not bad, "; ".join(bad))
bound = {(b.get("roleRef") or {}).get("name") for b in bindings}
for r in ("tessera-extender", "tessera-leader-election", "system:kube-scheduler", "system:volume-scheduler",
          "extension-apiserver-authentication-reader", RESERVE_SA):
    check("role %s is bound" % r, r in bound)
bound_roles = {((b.get("roleRef") or {}).get("kind"), (b.get("roleRef") or {}).get("name")) for b in bindings}
check("both the ClusterRole and the Role tessera-extender are bound",
      {("ClusterRole", "tessera-extender"), ("Role", "tessera-extender")} <= bound_roles, str(sorted(bound_roles)))

# ---- KubeSchedulerConfiguration ------------------------------------------------------------
cfg, cm_name, cfg_key, mount_ok = None, None, None, False
ksf = flags((kubesched.get("command") or [])[1:] + (kubesched.get("args") or []))
cfg_path = ksf.get("config", "")
for v in pod.get("volumes") or []:
    cmv = v.get("configMap")
    if not cmv:
        continue
    for m in kubesched.get("volumeMounts") or []:
        if m.get("name") != v.get("name") or not cfg_path.startswith(m.get("mountPath", "").rstrip("/") + "/"):
            continue
        sub = cfg_path[len(m["mountPath"].rstrip("/")) + 1:]
        items = cmv.get("items")
        key = next((i["key"] for i in items if i.get("path") == sub), None) if items else sub
        if key:
            cm_name, cfg_key, mount_ok = cmv.get("name"), key, True
check("kube-scheduler --config points into a mounted ConfigMap", mount_ok, "--config %r" % cfg_path)
cm = one("ConfigMap", cm_name) if cm_name else None
text = ((cm or {}).get("data") or {}).get(cfg_key)
check("ConfigMap %s holds key %s" % (cm_name, cfg_key), text is not None)
try:
    cfg = yaml.safe_load(text) if text else None
    check("the embedded KubeSchedulerConfiguration parses", isinstance(cfg, dict))
except yaml.YAMLError as e:
    check("the embedded KubeSchedulerConfiguration parses", False, str(e).replace("\n", " "))
cfg = cfg if isinstance(cfg, dict) else {}
# extender/README.md shows this configuration in full; it must be the same one.
try:
    with open(os.path.join(ROOT, "extender", "README.md")) as fh:
        blocks = re.findall(r"```yaml\n(.*?)```", fh.read(), re.S)
    shown = [yaml.safe_load(b) for b in blocks if "kind: KubeSchedulerConfiguration" in b]
    check("extender/README.md shows the KubeSchedulerConfiguration of deploy/scheduler-config.yaml",
          len(shown) == 1 and shown[0] == cfg)
except (OSError, yaml.YAMLError) as e:
    check("extender/README.md shows the KubeSchedulerConfiguration of deploy/scheduler-config.yaml", False, str(e))
check("it is kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration",
      cfg.get("apiVersion") == "kubescheduler.config.k8s.io/v1" and cfg.get("kind") == "KubeSchedulerConfiguration")
profiles = cfg.get("profiles") or []
check("exactly one profile, schedulerName %s" % SCHEDULER_NAME,
      [p.get("schedulerName") for p in profiles] == [SCHEDULER_NAME])


def duration(s):
    """Go duration string -> seconds (None if malformed)."""
    if not isinstance(s, str) or not re.fullmatch(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+", s):
        return None
    unit = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * unit[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", s))


le_cfg = cfg.get("leaderElection") or {}
check("leaderElection is on, with Lease %s/%s of its own" % (NAMESPACE, le_cfg.get("resourceName")),
      le_cfg.get("leaderElect") is True and le_cfg.get("resourceLock") == "leases"
      and le_cfg.get("resourceNamespace") == NAMESPACE and le_cfg.get("resourceName") not in (None, "kube-scheduler")
      and le_cfg.get("resourceName") in LEADER_LEASES and le_cfg.get("resourceName") != "tessera-extender")
ld, rd, rp = (duration(le_cfg.get(k)) for k in ("leaseDuration", "renewDeadline", "retryPeriod"))
check("leaderElection timings are valid (leaseDuration > renewDeadline > 1.2 x retryPeriod > 0)",
      None not in (ld, rd, rp) and ld > rd > 1.2 * rp > 0, "%s/%s/%s" % (ld, rd, rp))

# The extender's own leader election (extender/base/leader.h): on, on a Lease the Role allows, with valid timings,
# and an identity from the downward API.
xle = xf.get("leader-elect", "true")
check("extender leader election is on (--leader-elect absent, bare or =true)", xle in ("", "true"), repr(xle))
x_ns = xf.get("leader-elect-namespace")
x_name = xf.get("leader-elect-name", "tessera-extender")
env = {e.get("name"): e for e in extender.get("env") or []}


def field_ref(name):
    return ((env.get(name) or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")


check("extender Lease is in namespace %s (--leader-elect-namespace or POD_NAMESPACE)" % NAMESPACE,
      x_ns == NAMESPACE or (x_ns is None and field_ref("POD_NAMESPACE") == "metadata.namespace"), repr(x_ns))
check("extender Lease %r is one the Role allows, and not kube-scheduler's %r" % (x_name, le_cfg.get("resourceName")),
      x_name in LEADER_LEASES and x_name != le_cfg.get("resourceName"))
check("extender identity comes from POD_NAME = metadata.name (downward API)", field_ref("POD_NAME") == "metadata.name",
      repr(field_ref("POD_NAME")))
# The extender follows kube-scheduler's own Lease (extender/base/leader.h, "Who campaigns"): --scheduler-lease must
# name exactly the Lease of scheduler-config.yaml, or the extender's Lease (and the background work it carries)
# would not follow the active kube-scheduler.
x_sched = xf.get("scheduler-lease", (x_ns or NAMESPACE) + "/tessera-scheduler")
x_sched_full = x_sched if "/" in x_sched else "%s/%s" % (x_ns or NAMESPACE, x_sched)
check("extender --scheduler-lease %r is kube-scheduler's Lease %s/%s (leaderElection)"
      % (x_sched, le_cfg.get("resourceNamespace"), le_cfg.get("resourceName")),
      x_sched_full == "%s/%s" % (le_cfg.get("resourceNamespace"), le_cfg.get("resourceName")))
xld, xrd, xrp = (duration(xf.get("leader-elect-" + k, d)) for k, d in
                 (("lease-duration", "15s"), ("renew-deadline", "10s"), ("retry-period", "2s")))
check("extender leader election timings are valid (lease duration in whole seconds > renew deadline > "
      "1.2 x retry period > 0)",
      None not in (xld, xrd, xrp) and xld == int(xld) and xld > xrd > 1.2 * xrp > 0, "%s/%s/%s" % (xld, xrd, xrp))
# A bind admitted by the leader must end before a successor can hold the Lease (leader.h, bind budget).
bt = xf.get("bind-timeout")
bt_s = duration(bt if bt is None or not bt.isdigit() else bt + "s") if bt is not None else 10
check("extender bind timeout (%ss) is shorter than its lease duration" % bt_s,
      bt_s is not None and xld is not None and bt_s < xld)
grace = pod.get("terminationGracePeriodSeconds", 30)
check("terminationGracePeriodSeconds (%s) leaves time for a bind in flight and the Lease release" % grace,
      isinstance(grace, int) and bt_s is not None and grace > bt_s + 2)

exts = cfg.get("extenders") or []
check("exactly one extender", len(exts) == 1)
ext = exts[0] if exts else {}
check("extender has filter, prioritize, preempt and bind verbs",
      all(ext.get(v) for v in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb")))
check("extender weight is a positive integer",
      isinstance(ext.get("weight"), int) and not isinstance(ext.get("weight"), bool) and ext["weight"] > 0)
check("extender: enableHTTPS false, nodeCacheCapable true, ignorable false",
      ext.get("enableHTTPS") is False and ext.get("nodeCacheCapable") is True and ext.get("ignorable") is False)
t = duration(ext.get("httpTimeout"))
check("extender httpTimeout is set (0 < t <= 30s)", t is not None and 0 < t <= 30, repr(ext.get("httpTimeout")))
m = re.match(r"^(https?)://([^/:]+|\[[^\]]+\]):(\d+)(/.*)?$", ext.get("urlPrefix", ""))
check("urlPrefix is http on loopback", bool(m) and m.group(1) == "http"
      and m.group(2).strip("[]") in ("127.0.0.1", "localhost", "::1"), repr(ext.get("urlPrefix")))
check("urlPrefix port is the extender's --listen port %s" % listen_port,
      bool(m) and int(m.group(3)) == listen_port, repr(ext.get("urlPrefix")))
check("urlPrefix path is the extender's --url-prefix %s" % xf.get("url-prefix"),
      bool(m) and (m.group(4) or "").rstrip("/") == (xf.get("url-prefix") or "").rstrip("/"))

# managedResources against the model's request forms and the catalog.
catalog = {}
try:
    with open(os.path.join(ROOT, "data", "gpus.json")) as fh:
        for g in json.load(fh)["gpus"]:
            catalog[g["id"]] = [p["name"] for p in ((g.get("mig") or {}).get("profiles") or [])]
except (OSError, ValueError, KeyError) as e:
    check("data/gpus.json loads", False, str(e))
all_profiles = {p for ps in catalog.values() for p in ps}


def mig_profile(resource):
    """nvidia.com/mig-1g.10gb.me -> 1g.10gb+me (the catalog spelling)."""
    name = resource[len(MIG_PREFIX):]
    return name[:-3] + "+me" if name.endswith(".me") else name


def model_accepts(resource):
    if resource in BASE_RESOURCES:
        return True
    if resource.endswith(".shared"):   # replicas of time-sliced MIG instances (renameByDefault)
        resource = resource[:-len(".shared")]
    return resource.startswith(MIG_PREFIX) and mig_profile(resource) in all_profiles


QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def extended_name_ok(name):
    """kube-scheduler's validateExtendedResourceName: an extended (not native) resource
    whose quota form requests.<name> is a qualified name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, local = ("requests." + name).rpartition("/")
    return len(prefix) <= 253 and bool(DNS1123.match(prefix)) and len(local) <= 63 and bool(QUALIFIED.match(local))


mr = ext.get("managedResources") or []
names = [r.get("name") for r in mr]
managed = set(names)
check("managedResources has no duplicates", len(names) == len(managed),
      str(sorted({n for n in names if names.count(n) > 1})))
check("every managedResource is a valid extended resource name",
      all(extended_name_ok(n or "") for n in names), str([n for n in names if not extended_name_ok(n or "")]))
check("every managedResource is a request form the model accepts (MIG profiles from data/gpus.json)",
      all(model_accepts(n or "") for n in names), str([n for n in names if not model_accepts(n or "")]))
check("managedResources include every non-MIG request form", set(BASE_RESOURCES) <= managed,
      str(sorted(set(BASE_RESOURCES) - managed)))
need = {MIG_PREFIX + p.replace("+", ".") for pid in REQUIRED_MIG_PRODUCTS for p in catalog.get(pid, [])}
check("managedResources include every MIG profile of %s" % ", ".join(REQUIRED_MIG_PRODUCTS),
      bool(need) and need <= managed, str(sorted(need - managed)))
wrong = [r.get("name") for r in mr
         if r.get("ignoredByScheduler") is not BASE_RESOURCES.get(r.get("name"), False)]
check("ignoredByScheduler is true exactly for the resources nodes do not advertise "
      "(gpumem, gpumem-percentage, gpucores, the %s marker)" % MARKER, not wrong, str(wrong))

# ---- Service and PodDisruptionBudget -----------------------------------------------------
svc = one("Service", "tessera-metrics") or {}
check("Services: tessera-metrics and %s" % WEBHOOK_SERVICE,
      sorted(o["metadata"]["name"] for o in find("Service")) == sorted(["tessera-metrics", WEBHOOK_SERVICE]))
ann = svc.get("metadata", {}).get("annotations") or {}
sp = ((svc.get("spec") or {}).get("ports") or [{}])[0]
target = sp.get("targetPort", sp.get("port"))
target_num = port_number(extender, target)
check("Service selects the scheduler pods", matches({"matchLabels": (svc.get("spec") or {}).get("selector")}, pod_labels))
check("Service targets the extender's metrics port %s" % mlisten_port, target_num == mlisten_port,
      "targetPort %r" % target)
check("Service has prometheus.io scrape/port/path annotations for /metrics",
      ann.get("prometheus.io/scrape") == "true" and str(ann.get("prometheus.io/port")) == str(mlisten_port)
      and ann.get("prometheus.io/path") == "/metrics", str(ann))
pdb = one("PodDisruptionBudget") or {}
ps = pdb.get("spec") or {}
replicas = dep["spec"].get("replicas") or 1
check("PodDisruptionBudget selects the scheduler pods", matches(ps.get("selector"), pod_labels))
check("PodDisruptionBudget keeps at least one replica and lets one go",
      (isinstance(ps.get("maxUnavailable"), int) and 1 <= ps["maxUnavailable"] < replicas) or
      (isinstance(ps.get("minAvailable"), int) and 1 <= ps["minAvailable"] < replicas), str(ps))

pc = pod.get("priorityClassName")
if pc in ("system-cluster-critical", "system-node-critical"):
    surge = ((dep["spec"].get("strategy") or {}).get("rollingUpdate") or {}).get("maxSurge", 1)
    need_pods = replicas + (surge if isinstance(surge, int) else 1)
    quota_ok = False
    for q in find("ResourceQuota"):
        qs = q.get("spec") or {}
        exprs_ = ((qs.get("scopeSelector") or {}).get("matchExpressions") or [])
        if any(e.get("scopeName") == "PriorityClass" and e.get("operator") == "In" and pc in (e.get("values") or [])
               for e in exprs_) and int(str((qs.get("hard") or {}).get("pods", 0))) >= need_pods:
            quota_ok = True
    check("a ResourceQuota admits %d pods of priority class %s (providers that require one)" % (need_pods, pc),
          quota_ok)

# ---- soft-share delivery: the extender's flags, the webhook and its Service ------------------
delivery = xf.get("soft-share-delivery")
check("extender passes --soft-share-delivery (%s)" % "|".join(DELIVERY_MODES), delivery in DELIVERY_MODES,
      repr(delivery))
wl_host, wl_port = hostport(xf.get("webhook-listen"))
check("extender passes --webhook-listen on the pod IP, apart from --listen and --metrics-listen",
      wl_host in ("0.0.0.0", "", "::") and wl_port and wl_port not in (listen_port, mlisten_port),
      "--webhook-listen %r" % xf.get("webhook-listen"))
grace_flag = xf.get("reservation-grace")
check("extender --reservation-grace is a whole number of seconds (if given)",
      grace_flag is None or re.fullmatch(r"\d+s?", grace_flag) is not None, repr(grace_flag))
check("extender declares the webhook containerPort %s" % wl_port,
      wl_port is not None and any(p_.get("containerPort") == wl_port for p_ in extender.get("ports") or []))
check("no extender probe uses the webhook port (readiness must not depend on the webhook)",
      wl_port not in probe_ports.values(), str(probe_ports))
check("extender gets POD_NAMESPACE from the downward API (default reservation namespace, its own Pod)",
      field_ref("POD_NAMESPACE") == "metadata.namespace")

wsvc = one("Service", WEBHOOK_SERVICE) or {}
wports = (wsvc.get("spec") or {}).get("ports") or []
check("Service %s publishes not-ready pods (the webhook needs no API server; /readyz is about scheduling)"
      % WEBHOOK_SERVICE, (wsvc.get("spec") or {}).get("publishNotReadyAddresses") is True)
check("Service %s selects the scheduler pods" % WEBHOOK_SERVICE,
      matches({"matchLabels": (wsvc.get("spec") or {}).get("selector")}, pod_labels))

mwc = one("MutatingWebhookConfiguration", WEBHOOK_CONFIG) or {}
check("MutatingWebhookConfiguration %s (admissionregistration.k8s.io/v1) exists" % WEBHOOK_CONFIG,
      mwc.get("apiVersion") == "admissionregistration.k8s.io/v1")
hooks = mwc.get("webhooks") or []
check("it has exactly one webhook, %s" % WEBHOOK_NAME, [h.get("name") for h in hooks] == [WEBHOOK_NAME])
hook = hooks[0] if hooks else {}
cc = (hook.get("clientConfig") or {})
svc_ref = cc.get("service") or {}
check("webhook calls Service %s/%s at path %s" % (NAMESPACE, WEBHOOK_SERVICE, WEBHOOK_PATH),
      svc_ref.get("namespace") == NAMESPACE and svc_ref.get("name") == WEBHOOK_SERVICE
      and svc_ref.get("path") == WEBHOOK_PATH and "url" not in cc, str(cc))
ref_port = svc_ref.get("port", 443)
sp_ = next((p_ for p_ in wports if p_.get("port") == ref_port), None)
check("Service %s has the port %s the webhook calls" % (WEBHOOK_SERVICE, ref_port), sp_ is not None, str(wports))
wtarget = port_number(extender, (sp_ or {}).get("targetPort", ref_port))
check("that port targets the extender's --webhook-listen port %s" % wl_port,
      sp_ is not None and wtarget == wl_port, "targetPort %r" % (sp_ or {}).get("targetPort"))
check("webhook caBundle is left empty in the manifest (tessera patches it)", not cc.get("caBundle"))
rules_ = hook.get("rules") or []
check("webhook rules: CREATE of core v1 pods only",
      len(rules_) == 1 and rules_[0].get("operations") == ["CREATE"] and rules_[0].get("apiGroups") == [""]
      and rules_[0].get("apiVersions") == ["v1"] and rules_[0].get("resources") == ["pods"], str(rules_))
conds = hook.get("matchConditions") or []
on_sched = any(re.fullmatch(r"""\s*object\.spec\.schedulerName\s*==\s*['"]%s['"]\s*""" % re.escape(SCHEDULER_NAME),
                            c.get("expression") or "") for c in conds)
check("webhook matchConditions select pods of schedulerName %s" % SCHEDULER_NAME, on_sched, str(conds))
check("failurePolicy is Fail only together with that match condition",
      hook.get("failurePolicy", "Fail") != "Fail" or on_sched, "failurePolicy %r" % hook.get("failurePolicy"))
check("webhook failurePolicy Fail (a share must not be created without its delivery)",
      hook.get("failurePolicy") == "Fail")
check("webhook sideEffects None", hook.get("sideEffects") == "None")
check("webhook admissionReviewVersions [v1]", hook.get("admissionReviewVersions") == ["v1"])
check("webhook timeoutSeconds is set and short (1..10)",
      isinstance(hook.get("timeoutSeconds"), int) and 1 <= hook["timeoutSeconds"] <= 10)
check("webhook reinvocationPolicy IfNeeded", hook.get("reinvocationPolicy") == "IfNeeded")
nss = hook.get("namespaceSelector") or {}
excluded = set()
for e in nss.get("matchExpressions") or []:
    if e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "NotIn":
        excluded |= set(e.get("values") or [])
check("webhook namespaceSelector excludes %s and kube-system" % NAMESPACE,
      {NAMESPACE, "kube-system"} <= excluded and not nss.get("matchLabels"), str(nss))

# ---- reservation pods: priority class and identity -------------------------------------------
pcls = one("PriorityClass", RESERVE_PRIORITY_CLASS) or {}
check("PriorityClass %s: value %d, preemptionPolicy Never, not the global default" %
      (RESERVE_PRIORITY_CLASS, RESERVE_PRIORITY),
      pcls.get("value") == RESERVE_PRIORITY and pcls.get("preemptionPolicy") == "Never"
      and pcls.get("globalDefault") in (False, None) and bool(pcls.get("description")), str(pcls))
check("ServiceAccount %s is in namespace %s (and %s, for MPS reservations)" % (RESERVE_SA, NAMESPACE, MPS_NAMESPACE),
      one("ServiceAccount", RESERVE_SA, NAMESPACE) is not None and one("ServiceAccount", RESERVE_SA, MPS_NAMESPACE) is not None)

# ---- examples ----------------------------------------------------------------------------


def pod_resources(p):
    spec = p.get("spec") or {}
    out = {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        for sect in ("requests", "limits"):
            for k, v in (res.get(sect) or {}).items():
                out.setdefault(k, {})[sect] = v
    return out


# The quota example (README, Quotas): a ResourceQuota on both accounting resources, in the
# only form ResourceQuota accepts for extended resources (requests.<name>).
quotas = [o for p in example_files for o in docs[p] if o.get("kind") == "ResourceQuota"]
check("deploy/examples has a ResourceQuota on requests.%s and requests.%s" % ACCOUNTING,
      any(set((q.get("spec") or {}).get("hard") or {}) == {"requests." + a for a in ACCOUNTING} for q in quotas),
      str([(q.get("spec") or {}).get("hard") for q in quotas]))
example_pods = [(p, o) for p in example_files for o in docs[p] if o.get("kind") == "Pod"]
check("deploy/examples has example pods", len(example_pods) > 0)
forms = set()
for path, p in example_pods:
    name = "%s (%s)" % (rel(path), p["metadata"]["name"])
    anns = p["metadata"].get("annotations") or {}
    res = pod_resources(p)
    gpu_res = sorted(k for k in res if k.startswith("nvidia.com/"))
    check("%s: schedulerName %s" % (name, SCHEDULER_NAME), (p.get("spec") or {}).get("schedulerName") == SCHEDULER_NAME)
    check("%s: its GPU resources are managedResources" % name, set(gpu_res) <= managed,
          str(sorted(set(gpu_res) - managed)))
    check("%s: names a managed resource, so kube-scheduler sends it to tessera" % name,
          any(k in managed for k in res))
    bad = [k for k in gpu_res for v in res[k].values() if not re.fullmatch(r"\d+", str(v))]
    bad += [k for k in gpu_res if len(res[k]) == 2 and str(res[k]["requests"]) != str(res[k]["limits"])]
    check("%s: extended resources are whole numbers with request = limit" % name, not bad, str(bad))
    amount = {k: int(str(v.get("limits", v.get("requests")))) for k, v in res.items() if k in gpu_res}
    if amount.get("nvidia.com/gpu", 0) > 0:
        forms.add("whole GPUs" if "tessera.io/gpu-models" not in anns else "model constraint")
    if amount.get("nvidia.com/gpumem", 0) > 0:
        forms.add("nvidia.com/gpumem")
    if any(a in anns for a in ANNOTATION_FORMS):
        forms.add("gpu-fraction annotation")
    if any(k.startswith(MIG_PREFIX) for k in amount):
        forms.add("MIG profile" if anns.get("tessera.io/isolation") not in ("timeslice", "any") and
                  not any(k.endswith(".shared") for k in amount) else "MIG time-slice replica (layered)")
    if amount.get("nvidia.com/gpu.shared", 0) > 0:
        forms.add({"timeslice": "time-slice replica", "mps": "MPS replica"}.get(anns.get("tessera.io/isolation"),
                                                                                 "replica"))
    if "tessera.io/gpu-models" in anns:
        forms.add("model constraint")
want_forms = {"whole GPUs", "nvidia.com/gpumem", "gpu-fraction annotation", "MIG profile", "time-slice replica",
              "MPS replica", "model constraint", "MIG time-slice replica (layered)"}
check("the examples cover every request form (%s)" % ", ".join(sorted(want_forms)), want_forms <= forms,
      "missing " + ", ".join(sorted(want_forms - forms)))

# Device-plugin configurations the examples assume.
dp = [o for p in example_files for o in docs[p] if o.get("kind") == "ConfigMap"]
dpcfg = {}
for o in dp:
    for k, v in (o.get("data") or {}).items():
        try:
            dpcfg[k] = yaml.safe_load(v)
        except yaml.YAMLError as e:
            check("device-plugin config %s parses" % k, False, str(e))
check("device-plugin configs are all version v1",
      dpcfg and all(isinstance(c, dict) and c.get("version") == "v1" for c in dpcfg.values()))


def sharing(kind):
    for k, c in dpcfg.items():
        s = ((c or {}).get("sharing") or {}).get(kind)
        if s:
            yield k, s


def sharing_ok(s):
    rs = s.get("resources") or []
    return rs and all(r.get("name") == "nvidia.com/gpu" and isinstance(r.get("replicas"), int) and r["replicas"] >= 2
                      for r in rs)


def whole_gpu_sharing(kind):
    # the whole-GPU configs; a layered one (time-slicing of nvidia.com/mig-<profile>) is checked below
    for k, s in sharing(kind):
        if all((r.get("name") or "") == "nvidia.com/gpu" for r in (s.get("resources") or [])):
            yield k, s


for kind, label in (("timeSlicing", "time-slicing"), ("mps", "MPS")):
    found = list(whole_gpu_sharing(kind))
    check("a %s device-plugin config with resources/replicas >= 2 and renameByDefault: true "
          "(the examples ask for nvidia.com/gpu.shared)" % label,
          found and all(sharing_ok(s) and s.get("renameByDefault") is True for _, s in found))
layered = [(k, s) for k, s in sharing("timeSlicing")
           if (s.get("resources") or []) and all((r.get("name") or "").startswith(MIG_PREFIX) and
                                                 isinstance(r.get("replicas"), int) and r["replicas"] >= 2
                                                 for r in s["resources"])
           and ((dpcfg[k].get("flags") or {}).get("migStrategy") == "mixed")]
check("a layered device-plugin config (time-slicing of nvidia.com/mig-<profile>, migStrategy mixed, "
      "replicas >= 2, resources the extender manages)",
      len(layered) == 1 and all(r["name"] in managed or r["name"] + ".shared" in managed
                                for r in layered[0][1]["resources"]) and
      (layered[0][1].get("renameByDefault") is not True or
       all(r["name"] + ".shared" in managed for r in layered[0][1]["resources"])))
check("no MPS config shares MIG devices (the device plugin refuses MPS on MIG)",
      not any((r.get("name") or "").startswith(MIG_PREFIX) for _, s in sharing("mps") for r in s.get("resources") or []))
check("a MIG mixed device-plugin config (flags.migStrategy: mixed)",
      any(((c or {}).get("flags") or {}).get("migStrategy") == "mixed" and not (c or {}).get("sharing")
          for c in dpcfg.values()))

# ---- every example on the nodes fake-gpu-nodes.sh fakes --------------------------------------
# The script's "fake" lines are turned into Node objects (labels and status as GFD and the device plugin would
# publish them), and the real extender (standalone, --cluster) must place each example pod exactly on the node
# the comment above its "fake" line names. Needs build/tessera-extender (`make`); skipped without it.
FAKE_SH = os.path.join(EXAMPLES, "fake-gpu-nodes.sh")
EXT_BIN = os.path.join(ROOT, "build", "tessera-extender")
fake_nodes, meant_for = [], {}
try:
    with open(FAKE_SH) as fh:
        sh = fh.read()
    for m in re.finditer(r'^# ((?:pod|quota)-[^:]+):.*\n^fake "\$(\d)" (\S+) (\d+) (\d+) (\S+) (\d+) (""|\S+) (.*)$', sh, re.M):
        pods_, idx, prod, cnt, mem, sharing_, reps, mig, res = m.groups()
        name = "fake-node-%s" % idx
        labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": prod,
                  "nvidia.com/gpu.count": cnt, "nvidia.com/gpu.memory": mem,
                  "nvidia.com/gpu.sharing-strategy": sharing_, "nvidia.com/gpu.replicas": reps}
        if mig != '""':
            labels["nvidia.com/mig.strategy"] = mig
        alloc = {"cpu": "8", "memory": "16Gi", "pods": "110"}
        alloc.update(kv.split("=", 1) for kv in res.split() if not kv.startswith("+"))
        labels.update(kv[1:].split("=", 1) for kv in res.split() if kv.startswith("+"))
        fake_nodes.append({"metadata": {"name": name, "labels": labels},
                           "status": {"capacity": alloc, "allocatable": alloc}})
        for stem in re.findall(r"(?:pod|quota)-[a-z0-9-]+", pods_):
            meant_for[stem] = name
except OSError as e:
    check("deploy/examples/fake-gpu-nodes.sh exists", False, str(e))
stems = sorted(os.path.splitext(os.path.basename(p_))[0] for p_, _ in example_pods)
check("fake-gpu-nodes.sh fakes a node for every example pod (%d nodes)" % len(fake_nodes),
      len(fake_nodes) == 5 and set(stems) <= set(meant_for), "no node for %s" % sorted(set(stems) - set(meant_for)))
# The fake nodes advertise what device-plugin-config.yaml would make the plugin advertise.
dp_replicas = {k: ((c.get("sharing") or {}).get(k2) or {}).get("resources", [{}])[0].get("replicas")
               for k, c in dpcfg.items() if isinstance(c, dict) for k2 in ("timeSlicing", "mps")
               if (c.get("sharing") or {}).get(k2)}
wrong = []
for n in fake_nodes:
    lb, al = n["metadata"]["labels"], n["status"]["allocatable"]
    strat = {"time-slicing": "time-slicing", "mps": "mps"}.get(lb["nvidia.com/gpu.sharing-strategy"])
    if strat and (int(lb["nvidia.com/gpu.replicas"]) != dp_replicas.get(strat) or
                  int(al.get("nvidia.com/gpu.shared", 0)) != int(lb["nvidia.com/gpu.count"]) * dp_replicas.get(strat, 0)):
        wrong.append("%s: %s replicas/gpu.shared differ from device-plugin-config.yaml" % (n["metadata"]["name"], strat))
    for k_, s_ in layered:   # a layered node: every replicated profile as the config says
        for r_ in s_["resources"]:
            prof = r_["name"]
            if prof + ".replicas" in lb and (int(lb[prof + ".replicas"]) != r_["replicas"] or
                                             int(al.get(prof, 0)) % r_["replicas"] != 0 or
                                             not lb.get(prof + ".product", "").endswith("-SHARED")):
                wrong.append("%s: %s replicas/product differ from device-plugin-config.yaml key %s" %
                             (n["metadata"]["name"], prof, k_))
    wrong += ["%s: %s is not a managed resource" % (n["metadata"]["name"], k) for k in al
              if k.startswith("nvidia.com/") and k not in managed]
check("fake nodes match device-plugin-config.yaml (replicas, renamed resources) and managedResources", not wrong,
      "; ".join(wrong))
if not os.access(EXT_BIN, os.X_OK):
    print("# SKIP placing the examples on the fake nodes: build/tessera-extender is not built (run make)")
elif fake_nodes:
    import socket
    import subprocess
    import tempfile
    import time
    import urllib.request
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tf:
        json.dump({"kind": "NodeList", "items": fake_nodes}, tf)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([EXT_BIN, "--cluster", tf.name, "--listen", "127.0.0.1:%d" % port, "--log-level", "error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    up = False
    for _ in range(100):
        try:
            up = urllib.request.urlopen(base + "/readyz", timeout=2).status == 200
            break
        except OSError:
            time.sleep(0.05)
    check("tessera-extender --cluster serves the fake nodes", up)
    for path, o in example_pods if up else []:
        stem = os.path.splitext(os.path.basename(path))[0]
        pod_ = json.loads(json.dumps(o))
        pod_["metadata"].setdefault("namespace", "default")
        pod_["metadata"]["uid"] = "uid-" + pod_["metadata"]["name"]
        body = json.dumps({"Pod": pod_, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in fake_nodes]})
        try:
            req = urllib.request.Request(base + "/tessera/filter", data=body.encode(), method="POST")
            got_ = json.load(urllib.request.urlopen(req, timeout=5))
        except (OSError, ValueError) as e:
            got_ = {"Error": str(e)}
        check("%s: tessera places it on %s only" % (rel(path), meant_for.get(stem)),
              got_.get("NodeNames") == [meant_for.get(stem)],
              "NodeNames %s, Error %r, FailedNodes %s" % (got_.get("NodeNames"), got_.get("Error"),
                                                        got_.get("FailedNodes")))
    proc.terminate()
    proc.wait(timeout=10)
    os.unlink(tf.name)

# ---- every share pod reaches tessera (issue 11, Deliver 0) -------------------------------------
# kube-scheduler calls an extender (filter, prioritize, preempt and bind) only for pods it is
# "interested" in. This is HTTPExtender.IsInterested of kube-scheduler v1.26
# (pkg/scheduler/extender.go), rule for rule:
#   - an empty managedResources means every pod;
#   - otherwise the pod must name a managed resource as a key of requests or limits of one of its
#     containers, or else of one of its init containers; the amount is not looked at ("0" counts);
#     annotations, labels and ephemeral containers are not looked at.
# Each request form of README.md's "Request forms" table is built into a pod as the README describes
# it, sent through tessera's admission webhook (the standalone extender serves it), and the mutated
# pod must interest kube-scheduler's extender under deploy/scheduler-config.yaml's managedResources.
# Without the webhook, the README's instruction (the marker on annotation-only pods) must do the same.


def is_interested(pod_, managed_names):
    if not managed_names:
        return True
    spec = pod_.get("spec") or {}

    def has_managed(containers):
        for c in containers or []:
            res = c.get("resources") or {}
            if any(k in managed_names for k in (res.get("requests") or {})):
                return True
            if any(k in managed_names for k in (res.get("limits") or {})):
                return True
        return False
    return has_managed(spec.get("containers")) or has_managed(spec.get("initContainers"))


def json_pointer_parts(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError("JSON pointer %r does not start with /" % path)
    return [p_.replace("~1", "/").replace("~0", "~") for p_ in path[1:].split("/")]


def apply_json_patch(doc, ops):
    """RFC 6902 add, replace (and remove, test) on a copy of doc; anything else is an error."""
    doc = json.loads(json.dumps(doc))
    for op in ops:
        kind, parts = op.get("op"), json_pointer_parts(op.get("path", ""))
        if kind not in ("add", "replace", "remove", "test"):
            raise ValueError("unsupported JSONPatch op %r" % kind)
        if not parts:
            if kind in ("add", "replace"):
                doc = op["value"]
                continue
            raise ValueError("op %s on the whole document" % kind)
        parent = doc
        for p_ in parts[:-1]:
            parent = parent[int(p_)] if isinstance(parent, list) else parent[p_]
        last = parts[-1]
        if isinstance(parent, list):
            if kind == "add":
                idx = len(parent) if last == "-" else int(last)
                if not 0 <= idx <= len(parent):
                    raise ValueError("add index %s out of range" % last)
                parent.insert(idx, op["value"])
            elif kind == "replace":
                parent[int(last)] = op["value"]
            elif kind == "remove":
                del parent[int(last)]
            elif parent[int(last)] != op["value"]:
                raise ValueError("test failed at %s" % op.get("path"))
        elif isinstance(parent, dict):
            if kind == "add":
                parent[last] = op["value"]
            elif kind == "replace":
                if last not in parent:
                    raise ValueError("replace of missing member %s" % op.get("path"))
                parent[last] = op["value"]
            elif kind == "remove":
                del parent[last]
            elif parent.get(last) != op["value"]:
                raise ValueError("test failed at %s" % op.get("path"))
        else:
            raise ValueError("path %s goes through a scalar" % op.get("path"))
    return doc


def md_table(text, heading):
    """Rows (dicts by header) of the first Markdown table after the heading line."""
    m = re.search(r"^#+ %s\s*$" % re.escape(heading), text, re.M)
    if not m:
        return None
    lines_ = text[m.end():].splitlines()
    i = next((k for k, l in enumerate(lines_) if l.startswith("|")), None)
    if i is None:
        return None

    def cells(l):
        # split on | outside backticks
        out, cur, tick = [], "", False
        for ch in l.strip()[1:-1] if l.strip().endswith("|") else l.strip()[1:]:
            if ch == "`":
                tick = not tick
            if ch == "|" and not tick:
                out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        out.append(cur.strip())
        return out
    header = [h.lower() for h in cells(lines_[i])]
    rows = []
    for l in lines_[i + 2:]:
        if not l.startswith("|"):
            break
        rows.append(dict(zip(header, cells(l))))
    return rows


def ticks(s_):
    return re.findall(r"`([^`]*)`", s_ or "")


def unquote(v):
    v = v.strip()
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'" else v


def base_pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "forms", "uid": "uid-" + name, "annotations": {}},
            "spec": {"schedulerName": SCHEDULER_NAME,
                     "containers": [{"name": "app", "image": "example/app:1",
                                     "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}}}]}}


def add_resource(pod_, name, value):
    # As in a pod spec: a limit; the apiserver defaults the request of an extended resource to its limit.
    res = pod_["spec"]["containers"][0]["resources"]
    res.setdefault("limits", {})[name] = value
    res.setdefault("requests", {})[name] = value


README_MD = os.path.join(ROOT, "README.md")
try:
    with open(README_MD) as fh:
        readme_text = fh.read()
except OSError:
    readme_text = ""
form_rows = md_table(readme_text, "Request forms")
check("README.md has a \"Request forms\" table with form, example and delivered-by columns",
      bool(form_rows) and all(k in form_rows[0] for k in ("form", "example", "delivered by")))
form_rows = form_rows or []

# Classify the rows: the marker, forms that qualify another form, and forms that build a pod by themselves.
marker_rows = [r_ for r_ in form_rows if r_.get("form", "").startswith("marker")]
marker_name = marker_value = None
if len(marker_rows) == 1:
    kv = [t for t in ticks(marker_rows[0].get("example")) if ":" in t]
    if len(kv) == 1:
        marker_name, marker_value = (x.strip() for x in kv[0].split(":", 1))
        marker_value = unquote(marker_value)
check("the Request forms table names one marker (%s: \"1\" expected)" % MARKER,
      marker_name == MARKER and marker_value == "1", "%r: %r" % (marker_name, marker_value))
check("the marker is a managedResource with ignoredByScheduler: true",
      any(r_.get("name") == marker_name and r_.get("ignoredByScheduler") is True for r_ in mr))

qualifiers, bases, unbuildable = [], [], []
for r_ in form_rows:
    if r_ in marker_rows:
        continue
    form_cell, ex = r_.get("form", ""), ticks(r_.get("example"))
    delivered = r_.get("delivered by", "")
    if form_cell.startswith("annotation"):
        keys = ticks(form_cell)
        if not keys or not ex:
            unbuildable.append(form_cell)
            continue
        variants = [{k: unquote(v)} for k in keys for v in ex]
    else:
        variants = []
        for t in ex:
            if ":" not in t or "/" not in t.split(":", 1)[0]:
                unbuildable.append("%s (example %r)" % (form_cell, t))
                continue
            k, v = (x.strip() for x in t.split(":", 1))
            variants.append({"resource": (k, unquote(v))})
        if not variants:
            unbuildable.append(form_cell)
            continue
    entry = {"form": form_cell, "delivered": delivered, "variants": variants}
    (qualifiers if delivered.startswith("qualifies") else bases).append(entry)
    if not delivered:
        unbuildable.append("%s (no delivered-by)" % form_cell)
check("every row of the Request forms table can be turned into a pod (%d forms, %d qualifiers)" %
      (len(bases), len(qualifiers)), bases and not unbuildable, "; ".join(unbuildable))


def build(variant_list, name):
    p_ = base_pod(name)
    for v in variant_list:
        for k, val in v.items():
            if k == "resource":
                add_resource(p_, *val)
            else:
                p_["metadata"]["annotations"][k] = val
    return p_


form_pods = []   # (label, pod, delivered-by of its base form)
n_ = 0
for b in bases:
    for v in b["variants"]:
        n_ += 1
        label = ", ".join("%s: %s" % (val if k == "resource" else (k, val)) for k, val in v.items())
        form_pods.append((label, build([v], "form-%d" % n_), b["delivered"]))
        for q in qualifiers:
            for qv in q["variants"]:
                n_ += 1
                qlabel = label + " + " + ", ".join("%s: %s" % kv_ for kv_ in qv.items())
                form_pods.append((qlabel, build([v, qv], "form-%d" % n_), b["delivered"]))
cpu_pod = base_pod("cpu-only")

# Without the webhook (--soft-share-delivery=none, or the webhook not installed): the README says a pod
# that names no resource (the annotation-only forms) carries the marker in its first app container.
no_hook_bad = []
for label, p_, _ in form_pods:
    q_ = json.loads(json.dumps(p_))
    if not is_interested(q_, managed) and marker_name:
        add_resource(q_, marker_name, marker_value)
    if not is_interested(q_, managed):
        no_hook_bad.append(label)
check("without the webhook, every request form (with the marker where the README says) reaches tessera "
      "(%d pods)" % len(form_pods), form_pods and not no_hook_bad, "not sent to tessera: " + "; ".join(no_hook_bad))
check("a CPU-only pod does not interest the extender (so this test can fail)", not is_interested(cpu_pod, managed))
check("an annotation-only share without the marker would not reach tessera (what the marker is for)",
      any(not is_interested(p_, managed) for _, p_, _ in form_pods))
check("kube-scheduler's rule: a managed resource named only by an init container counts",
      is_interested({"spec": {"containers": [{}], "initContainers": [
          {"resources": {"limits": {next(iter(managed), "x"): "1"}}}]}}, managed))

# With the webhook: the standalone extender serves POST /webhook/mutate on its main listener.
if not os.access(EXT_BIN, os.X_OK):
    print("# SKIP the webhook half of \"every share pod reaches tessera\": build/tessera-extender is not built (run make)")
else:
    import threading
    import urllib.error
    import urllib.request
    import base64
    # The webhook mutates as deploy/'s Deployment configures it: the flags that change what it adds to a pod are
    # the Deployment's own (a standalone extender's default delivery is "none", which adds no delivery at all).
    hook_flags = ["--%s=%s" % (f_, xf[f_]) for f_ in WEBHOOK_MUTATION_FLAGS if f_ in xf]
    # Under reservation delivery a soft share is admitted only with its tessera-cuda-shim init container, which runs
    # tessera's own image: in a cluster the extender reads it from its own Pod; standalone it is given, as
    # kustomization.yaml maps it.
    own_image = next(("%s:%s" % (i["newName"], i.get("newTag", "latest")) for i in kust.get("images") or []
                      if i.get("name") == EXTENDER_IMAGE and i.get("newName")), None)
    if own_image and not xf.get("reserve-image"):
        hook_flags.append("--reserve-image=" + own_image)
    proc = subprocess.Popen([EXT_BIN, "--demo", "--listen", "127.0.0.1:0", "--log-level", "error"] + hook_flags,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    hook_base, first = None, []

    def read_banner():
        for line in proc.stdout:
            first.append(line)
            m_ = re.search(r"tessera-extender \(standalone\) on (http://127\.0\.0\.1:\d+)/", line)
            if m_:
                break
        for _ in proc.stdout:     # keep draining so the extender never blocks on a full pipe
            pass
    t_ = threading.Thread(target=read_banner, daemon=True)
    t_.start()
    import time
    deadline = time.time() + 10
    while time.time() < deadline and not any("(standalone) on" in l for l in first):
        time.sleep(0.02)
    m_ = next((re.search(r"on (http://127\.0\.0\.1:\d+)/", l) for l in first if "(standalone) on" in l), None)
    hook_base = m_.group(1) if m_ else None
    check("tessera-extender --demo --listen 127.0.0.1:0 prints the port it listens on", hook_base is not None,
          "stdout: %r" % "".join(first)[:200])

    def review(p_, uid):
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                            "resource": {"group": "", "version": "v1", "resource": "pods"},
                            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
                            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
                            "name": p_["metadata"]["name"], "namespace": p_["metadata"]["namespace"],
                            "operation": "CREATE", "userInfo": {"username": "check_manifests"},
                            "object": p_, "oldObject": None, "dryRun": False,
                            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}
        req = urllib.request.Request(hook_base + WEBHOOK_PATH, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r_:
                return r_.status, json.load(r_)
        except urllib.error.HTTPError as e:
            return e.code, None

    def mutate(p_, uid):
        """-> (mutated pod or None if denied, patch ops, message), or raises ValueError."""
        code, out = review(p_, uid)
        if code != 200 or not isinstance(out, dict):
            raise ValueError("HTTP %s" % code)
        resp = out.get("response") or {}
        if resp.get("uid") != uid:
            raise ValueError("response.uid %r is not the request's %r" % (resp.get("uid"), uid))
        if not resp.get("allowed"):
            return None, [], ((resp.get("status") or {}).get("message") or "")
        if not resp.get("patch"):
            return p_, [], ""
        if resp.get("patchType") != "JSONPatch":
            raise ValueError("patchType %r" % resp.get("patchType"))
        ops = json.loads(base64.b64decode(resp["patch"]))
        return apply_json_patch(p_, ops), ops, ""

    status = review(cpu_pod, "probe-uid")[0] if hook_base else None
    if hook_base and status == 404:
        print("# SKIP the webhook half of \"every share pod reaches tessera\": %s%s answers 404 "
              "(this build of tessera-extender does not serve the webhook yet)" % (hook_base, WEBHOOK_PATH))
    elif hook_base:
        bad, refused, untouched_bad, init_only, unaccounted = [], [], [], [], []

        def accounting_op(o):
            p = o.get("path", "")
            if p.startswith("/spec/containers/0/resources/"):
                last = p.rsplit("/", 1)[1].replace("~1", "/").replace("~0", "~")
                if last in ACCOUNTING:
                    return True
            v = o.get("value")
            if p == "/spec/containers/0/resources" and isinstance(v, dict):
                return all(isinstance(m, dict) and set(m) <= set(ACCOUNTING) for m in v.values())
            return p.startswith("/spec/containers/0/resources/") and isinstance(v, dict) and set(v) <= set(ACCOUNTING)
        for i, (label, p_, delivered) in enumerate(form_pods):
            try:
                got_, ops, msg = mutate(p_, "form-uid-%d" % i)
            except (ValueError, KeyError, IndexError, TypeError) as e:
                bad.append("%s: %s" % (label, e))
                continue
            if got_ is None:
                # Refused at admission (e.g. a fraction on MPS with delivery=reservation): never placed
                # without tessera, but it must say why.
                (refused if msg else bad).append("%s%s" % (label, ": " + msg if msg else ": denied without a message"))
                continue
            if not is_interested(got_, managed):
                bad.append(label)
            if delivered.startswith("device plugin"):
                # only the accounting resources (README, Quotas), nothing else
                other = [o["path"] for o in ops if not accounting_op(o)]
                if other:
                    untouched_bad.append("%s: %s" % (label, ", ".join(other)))
            app = (got_.get("spec") or {}).get("containers") or [{}]
            r0 = app[0].get("resources") or {}
            vals = [(r0.get(sect) or {}).get(k) for k in ACCOUNTING for sect in ("requests", "limits")]
            if not all(v is not None and re.fullmatch(r"[1-9]\d*", str(v)) for v in vals) or vals[0] != vals[1] \
                    or vals[2] != vals[3]:
                unaccounted.append("%s: %s" % (label, vals))
            if marker_name and not is_interested(p_, managed):
                app = (got_.get("spec") or {}).get("containers") or [{}]
                r0 = (app[0].get("resources") or {})
                if not ((r0.get("requests") or {}).get(marker_name) == marker_value ==
                        (r0.get("limits") or {}).get(marker_name)):
                    init_only.append(label)
        check("with the webhook, every request form reaches tessera (%d pods; %d refused at admission with a reason)"
              % (len(form_pods), len(refused)), not bad, "; ".join(bad))
        for r_ in refused:
            print("# refused at admission: " + r_)
        check("the webhook puts the marker %s: \"%s\" in requests and limits of the first app container "
              "(the kubelet drops unadvertised extended resources from app containers only)" %
              (marker_name, marker_value), not init_only, "; ".join(init_only))
        check("the webhook adds only the accounting resources to pods whose GPU the device plugin delivers",
              not untouched_bad, "; ".join(untouched_bad))
        check("the webhook gives every GPU request form the accounting resources %s, request = limit, in the first "
              "app container" % ", ".join(ACCOUNTING), not unaccounted, "; ".join(unaccounted))
        try:
            got_, ops, _ = mutate(cpu_pod, "cpu-uid")
            check("the webhook leaves a CPU-only pod unchanged, and it still does not interest the extender",
                  got_ is not None and not ops and not is_interested(got_, managed), "%d ops" % len(ops))
        except ValueError as e:
            check("the webhook answers a CPU-only pod", False, str(e))
        other = json.loads(json.dumps(form_pods[-1][1])) if form_pods else base_pod("x")
        other["spec"]["schedulerName"] = "default-scheduler"
        try:
            got_, ops, _ = mutate(other, "other-sched-uid")
            check("the webhook leaves a share for another scheduler unchanged", got_ is not None and not ops,
                  "%d ops" % len(ops))
        except ValueError as e:
            check("the webhook answers a pod of another scheduler", False, str(e))

        # Pod Security (issue 28): what the webhook adds to a share must keep it at the level it met, or a share
        # that a namespace admits without tessera would be refused with it. Every request form is sent in two
        # dresses, each with an init container (the webhook may touch init containers too):
        #   restricted: every container restricted-clean, runAsNonRoot and seccomp set once on the pod, as a user
        #     of a namespace that enforces restricted writes it;
        #   baseline: no securityContext at all (root, the runtime's capabilities), as deploy/examples writes it.
        # Whatever the webhook adds (volumes, init containers, mounts, environment, resources), the patched pod is
        # judged at the same level by the API server's rules; a share the webhook refuses, with a reason, is fine.
        def dress(p_, level):
            q_ = json.loads(json.dumps(p_))
            spec_ = q_["spec"]
            spec_["initContainers"] = [{"name": "fetch", "image": "busybox:1.36", "command": ["true"]}]
            if level == "restricted":
                spec_["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000,
                                            "seccompProfile": {"type": "RuntimeDefault"}}
                for c_ in spec_["initContainers"] + spec_["containers"]:
                    c_["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
            return q_
        kept, lost, refused_pss = 0, [], 0
        for i, (label, p_, _) in enumerate(form_pods):
            for level in ("restricted", "baseline"):
                q_ = dress(p_, level)
                before = pss.evaluate(q_["metadata"], q_["spec"], level)
                if before:   # the test's own pod: must be clean, or the check below proves nothing
                    lost.append("%s (%s): the pod sent is not %s-clean: %s" % (label, level, level,
                                                                             pss.forbidden_detail(before)))
                    continue
                try:
                    got_, ops, msg = mutate(q_, "pss-%s-%d" % (level, i))
                except ValueError as e:
                    lost.append("%s (%s): %s" % (label, level, e))
                    continue
                if got_ is None:
                    refused_pss += 1
                    continue
                after = pss.evaluate(got_.get("metadata") or {}, got_.get("spec") or {}, level)
                # An MPS share mounts its daemon's host directories, which baseline and restricted forbid: in a
                # cluster the webhook reads the namespace's level and refuses it there, saying why (test_webhook.c);
                # this standalone webhook cannot read namespaces. Nothing else it adds may break the level.
                mps_ = (q_["metadata"].get("annotations") or {}).get("tessera.io/compute-sharing") == "mps"
                if mps_ and after and all(r_ in ("hostPath volumes", "restricted volume types") and "tessera-mps" in d_
                                          for r_, d_ in after):
                    refused_pss += 1
                    continue
                if after:
                    lost.append("%s, a %s-clean share: the webhook's patch (%s) makes it %s"
                                % (label, level, ", ".join("%s %s" % (o.get("op"), o.get("path")) for o in ops),
                                   pss.message(q_["metadata"]["name"], level, after)))
                else:
                    kept += 1
        check("the webhook keeps every share at the Pod Security level it met (%d restricted-clean and baseline-clean "
              "shares of every request form stay so; %d refused at admission with a reason)" % (kept, refused_pss),
              kept > 0 and not lost, "; ".join(lost[:5]) + (" (and %d more)" % (len(lost) - 5) if len(lost) > 5 else ""))
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()

# ---- Grafana dashboard ------------------------------------------------------------------
GRAFANA = os.path.join(DEPLOY, "grafana-dashboard.json")
dash = None
try:
    with open(GRAFANA) as fh:
        dash = json.load(fh)
    check("grafana-dashboard.json parses", isinstance(dash, dict))
except (OSError, ValueError) as e:
    check("grafana-dashboard.json parses", False, str(e))
dash = dash if isinstance(dash, dict) else {}


def walk_panels(ps):
    for p in ps or []:
        yield p
        yield from walk_panels(p.get("panels"))


panels = list(walk_panels(dash.get("panels")))
check("dashboard has a uid, a title and panels", bool(dash.get("uid") and dash.get("title") and panels))
ids = [p.get("id") for p in panels]
check("dashboard panel ids are unique", len(ids) == len(set(ids)))
exprs = [t.get("expr", "") for p in panels for t in p.get("targets") or []]
for v in (dash.get("templating") or {}).get("list") or []:
    q = v.get("query")
    exprs.append(q.get("query", "") if isinstance(q, dict) else (q or "") if v.get("type") == "query" else "")
# The extender's source writes each of these names (extender/metrics.c, and the per-namespace
# usage it takes from extender/quota.c).
try:
    msrc = ""
    for src_ in ("metrics.c", "quota.c"):
        with open(os.path.join(os.path.dirname(DEPLOY), "extender", src_)) as fh:
            msrc += fh.read()
    check("extender/metrics.c exports every metric listed here",
          all(m in msrc for m in EXTENDER_METRICS),
          str([m for m in EXTENDER_METRICS if m not in msrc]))
except OSError as e:
    check("extender/metrics.c is readable", False, str(e))
used = set()
for e in exprs:
    for tok in re.findall(r"\btessera_[a-z0-9_]+", e):
        base = re.sub(r"_(bucket|sum|count)$", "", tok)
        used.add(base if EXTENDER_METRICS.get(base) == "histogram" else tok)
unknown = sorted(used - set(EXTENDER_METRICS))
check("every metric the dashboard queries is one tessera-extender exports", not unknown, str(unknown))
check("the dashboard shows every metric tessera-extender exports", set(EXTENDER_METRICS) <= used,
      str(sorted(set(EXTENDER_METRICS) - used)))

# ---- Containerfile ------------------------------------------------------------------------
try:
    with open(os.path.join(DEPLOY, "Containerfile")) as fh:
        cf = fh.read()
    lines = [l.strip() for l in re.sub(r"\\\n", " ", cf).splitlines() if l.strip() and not l.startswith("#")]
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    check("Containerfile is multi-stage on debian:bookworm-slim",
          len(froms) >= 2 and all(l.split()[1] == "debian:bookworm-slim" for l in froms), str(froms))
    last = lines[max(i for i, l in enumerate(lines) if l.upper().startswith("FROM ")):]
    users = [l.split()[1] for l in last if l.upper().startswith("USER ")]
    check("Containerfile's runtime stage runs as USER %d" % RUNTIME_UID,
          users and users[-1].split(":")[0] == str(RUNTIME_UID), str(users))
    pkgs = set()
    for l in last:
        m2 = re.search(r"apt-get install (.*?)(&&|$)", l)
        if m2:
            pkgs |= {w for w in m2.group(1).split() if not w.startswith("-")}
    check("runtime stage installs only %s" % ", ".join(sorted(RUNTIME_PACKAGES)), pkgs == RUNTIME_PACKAGES,
          str(sorted(pkgs)))
    check("build stage builds tessera-extender with make", re.search(r"RUN .*make .*tessera-extender", cf) is not None)
    # Reservation pods run the extender's own image with command /usr/local/bin/tessera-reserve.
    check("build stage builds tessera-reserve with make", re.search(r"RUN .*make .*build/tessera-reserve", cf) is not None)
    # Reservation pods run the extender's own image with command [RESERVE_BIN] (plan of issue 11).
    check("runtime stage carries tessera-reserve at %s (the reservation pods' command)" % RESERVE_BIN,
          any(l.upper().startswith("COPY ") and l.split()[-1] in (RESERVE_BIN, os.path.dirname(RESERVE_BIN) + "/")
              and "tessera-reserve" in l for l in last), "no COPY of tessera-reserve to %s" % RESERVE_BIN)
    check("build stage builds tessera-node-agent with make",
          re.search(r"RUN .*make .*build/tessera-node-agent", cf) is not None)
    check("runtime stage carries tessera-node-agent at %s (the node agent DaemonSet's command)" % AGENT_BIN,
          any(l.upper().startswith("COPY ") and l.split()[-1] in (AGENT_BIN, os.path.dirname(AGENT_BIN) + "/")
              and "tessera-node-agent" in l for l in last), "no COPY of tessera-node-agent to %s" % AGENT_BIN)
    # The build stage sees only what it COPYs: copy exactly that into a scratch tree and
    # ask make (dry run) whether build/tessera-extender and build/tessera-reserve can be built from it.
    first = lines[:max(i for i, l in enumerate(lines) if l.upper().startswith("FROM "))]
    copies = [l.split()[1:] for l in first if l.upper().startswith("COPY ") and "--from" not in l]
    scratch = tempfile.mkdtemp(prefix="tessera-containerfile-")
    try:
        for args in copies:
            srcs, dst = args[:-1], args[-1]
            for src in srcs:
                path = os.path.join(ROOT, src)
                target = os.path.join(scratch, dst, os.path.basename(src.rstrip("/"))) if dst.endswith("/") and not src.endswith("/") \
                    else os.path.join(scratch, dst)
                if os.path.isdir(path):
                    shutil.copytree(path, target, dirs_exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copy(path, target)
        dry = subprocess.run(["make", "-n", "-C", scratch, "build/tessera-extender", "build/tessera-reserve",
                              "build/tessera-node-agent", "build/tessera-sim"], capture_output=True, text=True)
        check("the Containerfile's build stage COPYs everything `make build/tessera-extender build/tessera-reserve "
              "build/tessera-node-agent build/tessera-sim` needs",
              dry.returncode == 0, (dry.stderr or dry.stdout).strip()[-300:])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
except OSError as e:
    check("deploy/Containerfile exists", False, str(e))

# ---- the node agent: deploy/node-agent (and deploy/node-agent-policy), optional components --------
# Off by default (deploy/README.md, "Node agent", says why); checked here as `components: [node-agent,
# node-agent-policy]` would add them. What must agree: the flags with `tessera-node-agent --help`, the socket
# path with the hostPath mount, the probes with --metrics-listen, the RBAC with the calls agent/main.c makes, the
# admission policy with the agent's identity and the two annotations agent/ writes.
AGENT_COMPONENTS = ("node-agent", "node-agent-policy")
AGENT_SA = "tessera-node-agent"
# The agent needs hostPath and uid 0, which Pod Security baseline and restricted refuse: it lives in a namespace of
# its own, Pod Security privileged (deploy/namespace.yaml says why; deploy/README.md, "Pod Security").
AGENT_NAMESPACE = "tessera-node"
KUBELET_POD_RESOURCES = "/var/lib/kubelet/pod-resources"


def component_objects(name):
    path = os.path.join(DEPLOY, name, "kustomization.yaml")
    k = (docs.get(path) or [{}])[0]
    check("deploy/%s/kustomization.yaml is a kustomize Component" % name,
          k.get("kind") == "Component" and k.get("apiVersion") == "kustomize.config.k8s.io/v1alpha1",
          "%s %s" % (k.get("apiVersion"), k.get("kind")))
    files = sorted(p for p in docs if os.path.dirname(p) == os.path.join(DEPLOY, name) and p != path)
    listed_c = sorted(os.path.normpath(os.path.join(DEPLOY, name, r)) for r in k.get("resources") or [])
    check("deploy/%s/kustomization.yaml lists every manifest of its directory" % name, listed_c == files,
          "listed %s, present %s" % ([rel(p) for p in listed_c], [rel(p) for p in files]))
    return [o for p in files for o in docs[p]]


agent_objs = [o for c in AGENT_COMPONENTS for o in component_objects(c)]
check("deploy/kustomization.yaml leaves the node agent off by default (deploy/README.md says why)",
      not any(c in (kust.get("components") or []) for c in AGENT_COMPONENTS), str(kust.get("components")))


def agent_find(kind, name=None):
    found = [o for o in agent_objs if o.get("kind") == kind and (name is None or o["metadata"].get("name") == name)]
    return found[0] if len(found) == 1 else None


ds = agent_find("DaemonSet", "tessera-node-agent") or {"metadata": {}, "spec": {"template": {"spec": {}}}}
check("DaemonSet tessera-node-agent in namespace %s" % AGENT_NAMESPACE,
      ds["metadata"].get("namespace") == AGENT_NAMESPACE)
misplaced = ["%s/%s in %r" % (o.get("kind"), o["metadata"].get("name"), o["metadata"].get("namespace"))
             for o in agent_objs if o.get("kind") not in CLUSTER_SCOPED and o["metadata"].get("namespace") != AGENT_NAMESPACE]
check("every namespaced object of the node agent's components is in namespace %s" % AGENT_NAMESPACE, not misplaced,
      "; ".join(misplaced))
apod = ds["spec"].get("template", {}).get("spec", {})
actrs = apod.get("containers") or []
agent = actrs[0] if len(actrs) == 1 else {}
check("the DaemonSet runs one container, %s with the tessera image (kustomization.yaml's images: maps it)"
      % AGENT_BIN, agent.get("command") == [AGENT_BIN] and agent.get("image") == EXTENDER_IMAGE
      and not apod.get("initContainers"), "%s %s" % (agent.get("command"), agent.get("image")))
check("the DaemonSet's pod selector matches its template's labels",
      matches(ds["spec"].get("selector"),
              ds["spec"].get("template", {}).get("metadata", {}).get("labels") or {}))
check("only on GPU nodes: nodeSelector nvidia.com/gpu.present=\"true\"",
      (apod.get("nodeSelector") or {}) == {"nvidia.com/gpu.present": "true"}, str(apod.get("nodeSelector")))
check("tolerates the nvidia.com/gpu taint (any value and effect)",
      any(t.get("key") == "nvidia.com/gpu" and t.get("operator") == "Exists" and not t.get("effect")
          for t in apod.get("tolerations") or []), str(apod.get("tolerations")))
check("runtimeClassName nvidia (the GPU operator's RuntimeClass: it mounts libnvidia-ml.so.1)",
      apod.get("runtimeClassName") == "nvidia", str(apod.get("runtimeClassName")))
aenv = {e.get("name"): e for e in agent.get("env") or []}
check("NVIDIA_VISIBLE_DEVICES=all and NVIDIA_DRIVER_CAPABILITIES=utility (NVML, no CUDA)",
      (aenv.get("NVIDIA_VISIBLE_DEVICES") or {}).get("value") == "all"
      and (aenv.get("NVIDIA_DRIVER_CAPABILITIES") or {}).get("value") == "utility")
check("NODE_NAME from the downward API (spec.nodeName)",
      ((aenv.get("NODE_NAME") or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName")
check("the agent's pod uses its own ServiceAccount %s" % AGENT_SA, apod.get("serviceAccountName") == AGENT_SA)
asc, psc = agent.get("securityContext") or {}, apod.get("securityContext") or {}
check("no privileges beyond the socket's owner: not privileged, no privilege escalation, every capability "
      "dropped, read-only root, no host namespaces",
      not asc.get("privileged") and asc.get("allowPrivilegeEscalation") is False
      and (asc.get("capabilities") or {}).get("drop") == ["ALL"] and not (asc.get("capabilities") or {}).get("add")
      and asc.get("readOnlyRootFilesystem") is True
      and not any(apod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), str(asc))
check("runs as uid 0 (the kubelet's socket is root's; deploy/README.md), with seccomp RuntimeDefault",
      psc.get("runAsUser") == 0 and (psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault", str(psc))
ares = agent.get("resources") or {}
check("the agent has cpu and memory requests and limits",
      all((ares.get(k) or {}).get(r) for k in ("requests", "limits") for r in ("cpu", "memory")), str(ares))

af = flags((agent.get("command") or [])[1:] + (agent.get("args") or []))
agent_exe = os.path.join(ROOT, "build", "tessera-node-agent")
if os.access(agent_exe, os.X_OK):
    helptext = subprocess.run([agent_exe, "--help"], capture_output=True, text=True).stdout
    known = set(re.findall(r"^\s+--([a-z0-9-]+)", helptext, re.M))
    check("every flag the DaemonSet gives is one `tessera-node-agent --help` documents",
          af and set(af) <= known, "unknown: %s" % sorted(set(af) - known))
    for f_ in ("kube-api", "token-file", "ca-file", "client-cert", "client-key", "insecure-skip-tls-verify",
               "metrics-listen"):
        check("tessera-node-agent --help has the extender's --%s" % f_, f_ in known)
else:
    print("# SKIP the node agent's flags against --help: build/tessera-node-agent is not built (run make)")
for d_ in ("poll-interval", "min-write-interval", "topology-interval"):
    check("the DaemonSet sets --%s" % d_, bool(af.get(d_)), str(af.get(d_)))

mounts = {m.get("name"): m for m in agent.get("volumeMounts") or []}
vols = {v.get("name"): v for v in apod.get("volumes") or []}
sock = af.get("pod-resources-socket", KUBELET_POD_RESOURCES + "/kubelet.sock")
sock_mount = [m for m in mounts.values() if sock.startswith(m.get("mountPath", "//").rstrip("/") + "/")]
hp = ((vols.get(sock_mount[0].get("name")) or {}).get("hostPath") or {}) if sock_mount else {}
check("--pod-resources-socket (%s) lies in a read-only hostPath mount of the kubelet's %s" % (sock, KUBELET_POD_RESOURCES),
      len(sock_mount) == 1 and sock_mount[0].get("readOnly") is True and hp.get("path") == KUBELET_POD_RESOURCES
      and sock_mount[0].get("mountPath") == KUBELET_POD_RESOURCES, str(sock_mount) + " " + str(hp))
check("the only volume is that hostPath (no other host access)", list(vols) == [sock_mount[0].get("name")] if sock_mount else False,
      str(list(vols)))
_, amport = hostport(af.get("metrics-listen"))
check("--metrics-listen is on the pod IP and its port is the container port named metrics",
      amport and port_number(agent, "metrics") == amport, "%s vs %s" % (af.get("metrics-listen"), agent.get("ports")))
for probe, path_ in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    hg = (agent.get(probe) or {}).get("httpGet") or {}
    check("the agent's %s is GET %s on --metrics-listen's port" % (probe, path_),
          hg.get("path") == path_ and port_number(agent, hg.get("port")) == amport, str(hg))

# RBAC: exactly the calls agent/main.c makes on Nodes (node_call, its one way to the API: kube/client.h's kube_request
# appears once in agent/).
try:
    agent_src = ""
    for f in sorted(os.listdir(os.path.join(ROOT, "agent"))):
        if f.endswith(".c"):
            with open(os.path.join(ROOT, "agent", f)) as fh:
                agent_src += fh.read()
    calls = {m.lower() for m in re.findall(r'node_call\(c, "([A-Z]+)",', agent_src)}
    if agent_src.count("kube_request(") != 1:
        calls.add("kube_request outside node_call")
except OSError:
    calls = set()
acr = agent_find("ClusterRole", "tessera-node-agent") or {}
check("agent/ makes GET and PATCH calls on Nodes only (what the RBAC below must grant)", calls == {"get", "patch"},
      str(calls))
check("ClusterRole tessera-node-agent grants exactly nodes %s" % ",".join(sorted(calls)),
      grants(acr, True) == {("", "nodes", None): calls}, fmt_grants(grants(acr, True)))
acrb = agent_find("ClusterRoleBinding", "tessera-node-agent") or {}
check("ClusterRoleBinding tessera-node-agent binds that role to ServiceAccount %s/%s" % (AGENT_NAMESPACE, AGENT_SA),
      (acrb.get("roleRef") or {}).get("name") == "tessera-node-agent"
      and (acrb.get("subjects") or []) == [{"kind": "ServiceAccount", "name": AGENT_SA, "namespace": AGENT_NAMESPACE}]
      and agent_find("ServiceAccount", AGENT_SA) is not None
      and agent_find("ServiceAccount", AGENT_SA)["metadata"].get("namespace") == AGENT_NAMESPACE)

# The admission policy: the agent's identity and the annotations agent/ writes.
vap = agent_find("ValidatingAdmissionPolicy", "tessera-node-agent") or {}
vapb = agent_find("ValidatingAdmissionPolicyBinding", "tessera-node-agent") or {}
user = "system:serviceaccount:%s:%s" % (AGENT_NAMESPACE, AGENT_SA)
vspec = vap.get("spec") or {}
# The identity a bound token of the agent's pod carries: system:serviceaccount:<its namespace>:<its ServiceAccount>.
named = [m_ for c in vspec.get("matchConditions") or []
         for m_ in re.findall(r"request\.userInfo\.username\s*==\s*'([^']*)'", c.get("expression") or "")]
check("the admission policy applies to the agent's ServiceAccount only (%s, the DaemonSet's namespace and "
      "ServiceAccount)" % user,
      named == [user] and user == "system:serviceaccount:%s:%s" % (ds["metadata"].get("namespace"),
                                                                  apod.get("serviceAccountName")), str(named))
check("the admission policy covers UPDATE of core/v1 nodes (a PATCH is admitted as UPDATE)",
      any(r.get("resources") == ["nodes"] and "UPDATE" in (r.get("operations") or []) and r.get("apiGroups") == [""]
          for r in (vspec.get("matchConstraints") or {}).get("resourceRules") or []))
try:
    agent_src = "".join(open(os.path.join(ROOT, "agent", f_)).read() for f_ in ("topology.h", "main.c"))
    written = set(re.findall(r'#define AGENT_ANN_[A-Z]+ "([^"]+)"', agent_src))
except OSError:
    written = set()
owned = next((v.get("expression") for v in vspec.get("variables") or [] if v.get("name") == "owned"), "")
check("the admission policy's annotations are the ones agent/ writes (%s)" % ", ".join(sorted(written)),
      written == {"tessera.io/gpus", "tessera.io/holdings"} and set(re.findall(r"'([^']+)'", owned)) == written,
      "%s vs %s" % (owned, sorted(written)))
check("the admission policy limits the agent to its own Node (the token's node-name)",
      any("authentication.kubernetes.io/node-name" in (v.get("expression") or "") for v in vspec.get("validations") or []))
check("its binding denies (validationActions [Deny]) with policy tessera-node-agent",
      (vapb.get("spec") or {}).get("policyName") == "tessera-node-agent"
      and (vapb.get("spec") or {}).get("validationActions") == ["Deny"])
try:
    with open(os.path.join(DEPLOY, "README.md")) as fh:
        dreadme = fh.read()
except OSError:
    dreadme = ""
check("deploy/README.md has a \"Node agent\" section", re.search(r"^#+ Node agent", dreadme, re.M) is not None)

# ---- admission: what the cluster deploy/ is installed in admits (issue 28) ------------------------------
# A Deployment, DaemonSet or Job is stored whatever its template says; its controller's pods are judged later,
# one by one, where nobody looks (the DaemonSet shows 0 pods and a FailedCreate event). So every pod deploy/
# makes is judged here as the API server judges it at creation:
#   - Pod Security (tests/deploy/pod_security.py: the Pod Security Standards as the checks of
#     k8s.io/pod-security-admission implement them) at the enforce level of the namespace it lands in;
#   - the admission plugins and authorization a pod meets besides, where the rule is short (each says its source).
# The pods: every pod template of deploy/ and of its components (the Deployment, the node agent's DaemonSet), the
# sweep Job tessera-sim prints (its section, below), the examples, and the pods tessera makes at run time, which
# no manifest shows: the reservation pods the extender POSTs and the shares its webhook patches, taken from the
# real code by build/tessera-tests deployed_pods_for_admission (tests/unit/test_deployed_admission.c).

# -- the evaluator itself, on pods that break each rule once (the fields and allowed values of the Pod Security
# Standards' tables: kubernetes.io/docs/concepts/security/pod-security-standards/) and pods that do not.
RC = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}   # a restricted-clean container


def restricted_pod():
    return {"metadata": {"name": "p"},
            "spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "app", "image": "example/app:1", "securityContext": dict(RC)}]}}


def with_(change):
    """A restricted-clean pod changed by change(meta, spec, app_container)."""
    p_ = json.loads(json.dumps(restricted_pod()))
    change(p_["metadata"], p_["spec"], p_["spec"]["containers"][0])
    return p_


def sc_(c_, **kv):
    c_.setdefault("securityContext", {}).update(kv)


def add_(spec_, key, item):
    spec_.setdefault(key, []).append(item)


B_, R_ = "baseline", "restricted"
PSS_CASES = [
    # (what, pod, {level: [reasons]}, {level: detail of the first reason} or {})
    ("a restricted-clean pod", restricted_pod(), {B_: [], R_: []}, {}),
    ("a pod with no securityContext (the default pod)", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "app", "image": "example/app:1"}]}},
     {B_: [], R_: ["allowPrivilegeEscalation != false", "unrestricted capabilities", "runAsNonRoot != true",
                   "seccompProfile"]},
     {R_: 'container "app" must set securityContext.allowPrivilegeEscalation=false'}),
    # baseline: host namespaces
    ("hostNetwork", with_(lambda m, s, c: s.update(hostNetwork=True)), {B_: ["host namespaces"], R_: ["host namespaces"]},
     {B_: "hostNetwork=true"}),
    ("hostPID and hostIPC", with_(lambda m, s, c: s.update(hostPID=True, hostIPC=True)),
     {B_: ["host namespaces"], R_: ["host namespaces"]}, {B_: "hostPID=true, hostIPC=true"}),
    ("hostNetwork: false", with_(lambda m, s, c: s.update(hostNetwork=False)), {B_: [], R_: []}, {}),
    # privileged, in an init container and in an ephemeral container (visitor.go visits all three kinds)
    ("a privileged init container", with_(lambda m, s, c: add_(s, "initContainers", {
        "name": "init", "image": "x", "securityContext": dict(RC, privileged=True)})),
     {B_: ["privileged"], R_: ["privileged"]}, {B_: 'container "init" must not set securityContext.privileged=true'}),
    ("a privileged ephemeral container", with_(lambda m, s, c: add_(s, "ephemeralContainers", {
        "name": "debug", "image": "x", "securityContext": dict(RC, privileged=True)})),
     {B_: ["privileged"], R_: ["privileged"]}, {}),
    # capabilities
    ("capabilities.add NET_RAW", with_(lambda m, s, c: sc_(c, capabilities={"drop": ["ALL"], "add": ["NET_RAW"]})),
     {B_: ["non-default capabilities"], R_: ["unrestricted capabilities"]},
     {B_: 'container "app" must not include "NET_RAW" in securityContext.capabilities.add',
      R_: 'container "app" must not include "NET_RAW" in securityContext.capabilities.add'}),
    ("capabilities.add CHOWN (the runtime's default set)",
     with_(lambda m, s, c: sc_(c, capabilities={"drop": ["ALL"], "add": ["CHOWN"]})),
     {B_: [], R_: ["unrestricted capabilities"]}, {}),
    ("capabilities.add NET_BIND_SERVICE with drop ALL",
     with_(lambda m, s, c: sc_(c, capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})), {B_: [], R_: []}, {}),
    ("capabilities without drop ALL", with_(lambda m, s, c: sc_(c, capabilities={"drop": ["NET_RAW"]})),
     {B_: [], R_: ["unrestricted capabilities"]}, {R_: 'container "app" must set securityContext.capabilities.drop=["ALL"]'}),
    # volumes
    ("a hostPath volume", with_(lambda m, s, c: add_(s, "volumes", {"name": "host", "hostPath": {"path": "/var"}})),
     {B_: ["hostPath volumes"], R_: ["restricted volume types"]},
     {B_: 'volume "host"', R_: 'volume "host" uses restricted volume type "hostPath"'}),
    ("an nfs volume", with_(lambda m, s, c: add_(s, "volumes", {"name": "data", "nfs": {"server": "n", "path": "/"}})),
     {B_: [], R_: ["restricted volume types"]}, {R_: 'volume "data" uses restricted volume type "nfs"'}),
    ("every volume type restricted allows", with_(lambda m, s, c: s.update(volumes=[
        {"name": k, k: {}} for k in pss.RESTRICTED_VOLUME_OK])), {B_: [], R_: []}, {}),
    # host ports
    ("a hostPort", with_(lambda m, s, c: c.update(ports=[{"containerPort": 80, "hostPort": 8080}])),
     {B_: ["hostPort"], R_: ["hostPort"]}, {B_: 'container "app" uses hostPort 8080'}),
    ("hostPort 0", with_(lambda m, s, c: c.update(ports=[{"containerPort": 80, "hostPort": 0}])), {B_: [], R_: []}, {}),
    # AppArmor: the field and the annotation
    ("appArmorProfile Unconfined", with_(lambda m, s, c: sc_(c, appArmorProfile={"type": "Unconfined"})),
     {B_: ["forbidden AppArmor profile"], R_: ["forbidden AppArmor profile"]},
     {B_: 'container "app" must not set AppArmor profile type to "Unconfined"'}),
    ("appArmorProfile Localhost", with_(lambda m, s, c: sc_(c, appArmorProfile={"type": "Localhost",
                                                                                "localhostProfile": "k8s"})),
     {B_: [], R_: []}, {}),
    ("the AppArmor annotation unconfined", with_(lambda m, s, c: m.update(annotations={
        "container.apparmor.security.beta.kubernetes.io/app": "unconfined"})),
     {B_: ["forbidden AppArmor profile"], R_: ["forbidden AppArmor profile"]}, {}),
    ("the AppArmor annotation runtime/default", with_(lambda m, s, c: m.update(annotations={
        "container.apparmor.security.beta.kubernetes.io/app": "runtime/default"})), {B_: [], R_: []}, {}),
    # SELinux
    ("seLinuxOptions type spc_t on the pod", with_(lambda m, s, c: s["securityContext"].update(
        seLinuxOptions={"type": "spc_t"})), {B_: ["seLinuxOptions"], R_: ["seLinuxOptions"]},
     {B_: 'pod set forbidden securityContext.seLinuxOptions: type "spc_t"'}),
    ("seLinuxOptions user", with_(lambda m, s, c: sc_(c, seLinuxOptions={"user": "system_u"})),
     {B_: ["seLinuxOptions"], R_: ["seLinuxOptions"]}, {}),
    ("seLinuxOptions type container_t", with_(lambda m, s, c: sc_(c, seLinuxOptions={"type": "container_t"})),
     {B_: [], R_: []}, {}),
    # /proc mount, and the user-namespace relaxation that baseline has and restricted has not
    ("procMount Unmasked", with_(lambda m, s, c: sc_(c, procMount="Unmasked")), {B_: ["procMount"], R_: ["procMount"]},
     {B_: 'container "app" must not set securityContext.procMount to "Unmasked"'}),
    ("procMount Unmasked in a user namespace (hostUsers: false)",
     with_(lambda m, s, c: (sc_(c, procMount="Unmasked"), s.update(hostUsers=False))), {B_: [], R_: ["procMount"]}, {}),
    # seccomp, pod level and container level
    ("seccomp Unconfined on the pod", with_(lambda m, s, c: s["securityContext"].update(
        seccompProfile={"type": "Unconfined"})), {B_: ["seccompProfile"], R_: ["seccompProfile"]},
     {B_: 'pod must not set securityContext.seccompProfile.type to "Unconfined"'}),
    ("seccomp RuntimeDefault on the pod, Unconfined on a container",
     with_(lambda m, s, c: sc_(c, seccompProfile={"type": "Unconfined"})), {B_: ["seccompProfile"], R_: ["seccompProfile"]},
     {R_: 'container "app" must not set securityContext.seccompProfile.type to "Unconfined"'}),
    ("no seccomp anywhere", with_(lambda m, s, c: s["securityContext"].pop("seccompProfile")),
     {B_: [], R_: ["seccompProfile"]},
     {R_: 'pod or container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"'}),
    ("seccomp on the container only", with_(lambda m, s, c: (s["securityContext"].pop("seccompProfile"),
                                                             sc_(c, seccompProfile={"type": "Localhost"}))),
     {B_: [], R_: []}, {}),
    # sysctls
    ("an unsafe sysctl", with_(lambda m, s, c: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}])),
     {B_: ["forbidden sysctls"], R_: ["forbidden sysctls"]}, {B_: "kernel.msgmax"}),
    ("a safe sysctl (1.32's tcp_rmem)", with_(lambda m, s, c: s["securityContext"].update(
        sysctls=[{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}])), {B_: [], R_: []}, {}),
    # probe and lifecycle hosts (policy 1.34)
    ("a probe with a host", with_(lambda m, s, c: c.update(livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}})),
     {B_: ["probe or lifecycle host"], R_: ["probe or lifecycle host"]},
     {B_: 'container "app" uses probe or lifecycle host "10.0.0.1"'}),
    # Windows host process
    ("windowsOptions.hostProcess", with_(lambda m, s, c: s["securityContext"].update(
        windowsOptions={"hostProcess": True})), {B_: ["hostProcess"], R_: ["hostProcess"]}, {}),
    # restricted: privilege escalation, non-root, uid 0, and inheritance from the pod
    ("allowPrivilegeEscalation unset on an init container", with_(lambda m, s, c: add_(s, "initContainers", {
        "name": "init", "image": "x", "securityContext": {"capabilities": {"drop": ["ALL"]}}})),
     {B_: [], R_: ["allowPrivilegeEscalation != false"]},
     {R_: 'container "init" must set securityContext.allowPrivilegeEscalation=false'}),
    ("runAsNonRoot unset", with_(lambda m, s, c: s["securityContext"].pop("runAsNonRoot")),
     {B_: [], R_: ["runAsNonRoot != true"]}, {R_: 'pod or container "app" must set securityContext.runAsNonRoot=true'}),
    ("runAsNonRoot on the container only", with_(lambda m, s, c: (s["securityContext"].pop("runAsNonRoot"),
                                                                   sc_(c, runAsNonRoot=True))), {B_: [], R_: []}, {}),
    ("runAsNonRoot true on the pod, false on a container", with_(lambda m, s, c: sc_(c, runAsNonRoot=False)),
     {B_: [], R_: ["runAsNonRoot != true"]}, {R_: 'container "app" must not set securityContext.runAsNonRoot=false'}),
    ("runAsUser 0 on a container", with_(lambda m, s, c: sc_(c, runAsUser=0)), {B_: [], R_: ["runAsUser=0"]},
     {R_: 'container "app" must not set runAsUser=0'}),
    ("runAsUser 1000", with_(lambda m, s, c: sc_(c, runAsUser=1000)), {B_: [], R_: []}, {}),
    ("root in a user namespace (hostUsers: false, runAsUser 0, no runAsNonRoot)",
     with_(lambda m, s, c: (s.update(hostUsers=False), s["securityContext"].pop("runAsNonRoot"),
                            s["securityContext"].update(runAsUser=0))), {B_: [], R_: []}, {}),
    ("an ephemeral container without securityContext (kubectl debug): runAsNonRoot and seccomp come from the pod",
     with_(lambda m, s, c: add_(s, "ephemeralContainers", {"name": "debug", "image": "x"})),
     {B_: [], R_: ["allowPrivilegeEscalation != false", "unrestricted capabilities"]}, {}),
    ("a native sidecar (restartPolicy Always) is an init container like any other",
     with_(lambda m, s, c: add_(s, "initContainers", {"name": "side", "image": "x", "restartPolicy": "Always"})),
     {B_: [], R_: ["allowPrivilegeEscalation != false", "unrestricted capabilities"]}, {}),
    ("a Windows pod is exempt from allowPrivilegeEscalation, capabilities and seccomp",
     {"metadata": {"name": "p"}, "spec": {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": True},
                                          "containers": [{"name": "app", "image": "x"}]}}, {B_: [], R_: []}, {}),
]
for what, p_, want, detail in PSS_CASES:
    got = {lvl: pss.evaluate(p_["metadata"], p_["spec"], lvl) for lvl in (B_, R_)}
    ok_ = all([r for r, _ in got[lvl]] == want[lvl] for lvl in (B_, R_))
    ok_ = ok_ and all(got[lvl] and got[lvl][0][1] == d for lvl, d in detail.items())
    ok_ = ok_ and pss.evaluate(p_["metadata"], p_["spec"], "privileged") == []
    check("Pod Security evaluator: %s: baseline %s, restricted %s" % (
        what, ", ".join(want[B_]) or "admitted", ", ".join(want[R_]) or "admitted"), ok_,
          "got baseline: %s; restricted: %s" % (pss.forbidden_detail(got[B_]) or "admitted",
                                                 pss.forbidden_detail(got[R_]) or "admitted"))

# The pod a real v1.36 API server refused (issue 28): deploy/node-agent's DaemonSet as it was, in tessera. The
# server said `violates PodSecurity "restricted:latest": restricted volume types (volume "pod-resources" uses
# restricted volume type "hostPath"), runAsNonRoot != true, runAsUser=0`.
ISSUE_28_POD = {"securityContext": {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{"name": "tessera-node-agent", "image": "tessera-extender",
                                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                    "capabilities": {"drop": ["ALL"]}},
                                "volumeMounts": [{"name": "pod-resources",
                                                  "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True}]}],
                "volumes": [{"name": "pod-resources",
                             "hostPath": {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}}]}
issue_res = pss.evaluate({}, ISSUE_28_POD, "restricted")
check("Pod Security evaluator: the node agent's pod of issue 28 is refused in restricted with the API server's reasons "
      "(restricted volume types, runAsNonRoot != true, runAsUser=0) and message",
      ", ".join(r for r, _ in issue_res) == "restricted volume types, runAsNonRoot != true, runAsUser=0"
      and pss.message("tessera-node-agent-x7k2p", "restricted", issue_res) ==
      'pods "tessera-node-agent-x7k2p" is forbidden: violates PodSecurity "restricted:latest": restricted volume types '
      '(volume "pod-resources" uses restricted volume type "hostPath"), runAsNonRoot != true (pod must not set '
      'securityContext.runAsNonRoot=false), runAsUser=0 (pod must not set runAsUser=0)',
      pss.message("tessera-node-agent-x7k2p", "restricted", issue_res))
check("Pod Security evaluator: ... and admitted in baseline only but for its hostPath volume",
      [r for r, _ in pss.evaluate({}, ISSUE_28_POD, "baseline")] == ["hostPath volumes"])
try:
    pss.namespace_policy({"metadata": {"labels": {pss.LABEL_PREFIX + "enforce": "strict"}}})
    bad_label = False
except ValueError:
    bad_label = True
check("Pod Security evaluator: a namespace's enforce label gives the level (none: the API server's default, "
      "privileged; a value that is no level is an error)",
      pss.namespace_policy({"metadata": {"labels": {pss.LABEL_PREFIX + "enforce": "baseline"}}}) == ("baseline", "latest")
      and pss.namespace_policy({"metadata": {"name": "x"}}) == ("privileged", "latest") and bad_label)

# -- the namespaces deploy/ creates, and their levels
all_objs = [o for _, o in objects] + agent_objs
example_objs = [o for p_ in example_files for o in docs[p_]]
ns_objs = {o["metadata"]["name"]: o for o in all_objs + example_objs if o.get("kind") == "Namespace"}
ns_policy = {}
for n_, o in sorted(ns_objs.items()):
    try:
        ns_policy[n_] = pss.namespace_policy(o)
    except ValueError as e:
        check("Namespace %s has a valid Pod Security level" % n_, False, str(e))
NS_LEVELS = {NAMESPACE: "restricted", AGENT_NAMESPACE: "privileged"}
for n_, want_level in NS_LEVELS.items():
    labels_ = (ns_objs.get(n_, {}).get("metadata") or {}).get("labels") or {}
    modes = {m_: (labels_.get(pss.LABEL_PREFIX + m_), labels_.get(pss.LABEL_PREFIX + m_ + "-version"))
             for m_ in ("enforce", "warn")}
    check("namespace.yaml creates namespace %s enforcing Pod Security %s:latest, and warns at the same level (enforce "
          "judges only pods; warn makes `kubectl apply` of a Deployment or DaemonSet say what its pods would meet)"
          % (n_, want_level), any(o is ns_objs.get(n_) for _, o in objects)
          and modes == {"enforce": (want_level, "latest"), "warn": (want_level, "latest")}, str(modes))

# -- every pod: its namespace's level, and the admission rules beside Pod Security
# A privileged namespace allows anything; what tessera puts in one must still meet baseline but for what the
# namespace is privileged for (deploy/namespace.yaml says what and why).
PRIVILEGED_FOR = {AGENT_NAMESPACE: {"hostPath volumes"}}
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
priority_classes = {o["metadata"]["name"] for o in all_objs if o.get("kind") == "PriorityClass"}
runtime_classes = {o["metadata"]["name"] for o in all_objs if o.get("kind") == "RuntimeClass"}
service_accounts = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in all_objs + example_objs
                    if o.get("kind") == "ServiceAccount"}
quotas = [o for o in all_objs + example_objs if o.get("kind") == "ResourceQuota"]
LEVEL_ORDER = {lvl: i for i, lvl in enumerate(pss.LEVELS)}


def quota_selects(q, spec_):
    """Does ResourceQuota q count this pod: its scopeSelector's PriorityClass expressions (the only scope deploy/
    uses; another scope is taken to match, the stricter reading)."""
    for e in ((q.get("spec") or {}).get("scopeSelector") or {}).get("matchExpressions") or []:
        if e.get("scopeName") != "PriorityClass":
            continue
        pc_, op_, vals = spec_.get("priorityClassName"), e.get("operator"), e.get("values") or []
        if not ((op_ == "In" and pc_ in vals) or (op_ == "NotIn" and pc_ not in vals)
                or (op_ == "Exists" and pc_) or (op_ == "DoesNotExist" and not pc_)):
            return False
    return True


def admission_problems(ns, spec_):
    """What the API server's other admission plugins would refuse about a pod with this spec in namespace ns, in
    their own words."""
    out = []
    sa = spec_.get("serviceAccountName") or "default"
    # ServiceAccount admission (plugin/pkg/admission/serviceaccount): the account must exist in the pod's
    # namespace; "default" is created with every namespace.
    if sa != "default" and (ns, sa) not in service_accounts:
        out.append('error looking up service account %s/%s: serviceaccount "%s" not found (deploy/ defines none '
                   'there)' % (ns, sa, sa))
    # Priority admission (plugin/pkg/admission/priority): the class must exist; system-* are built in.
    pc_ = spec_.get("priorityClassName")
    if pc_ and pc_ not in SYSTEM_PRIORITY_CLASSES and pc_ not in priority_classes:
        out.append("no PriorityClass with name %s was found (deploy/ defines %s)" % (pc_, sorted(priority_classes)))
    # ResourceQuota: providers that limit the critical classes (an AdmissionConfiguration's limitedResources, as
    # kubernetes.io/docs/concepts/policy/resource-quotas/ "Limit Priority Class consumption by default" shows for
    # them) admit such a pod only where a quota selects its class.
    if pc_ in SYSTEM_PRIORITY_CLASSES and not any(
            q["metadata"].get("namespace") == ns and any(
                e.get("scopeName") == "PriorityClass" and e.get("operator") == "In" and pc_ in (e.get("values") or [])
                for e in (((q.get("spec") or {}).get("scopeSelector") or {}).get("matchExpressions") or []))
            for q in quotas):
        out.append("insufficient quota to match these scopes: [{PriorityClass In [%s]}] (no ResourceQuota in %s "
                   "selects it; resourcequota.yaml says why one is needed)" % (pc_, ns))
    # ResourceQuota: a quota on cpu or memory makes every pod it counts state them (resource-quotas, "Compute
    # Resource Quota": "users must specify requests or limits for those values").
    for q in quotas:
        if q["metadata"].get("namespace") != ns or not quota_selects(q, spec_):
            continue
        for key in (q.get("spec") or {}).get("hard") or {}:
            sect, _, res = key.rpartition(".")
            if res not in ("cpu", "memory") or sect not in ("", "requests", "limits"):
                continue
            lacking = [c_.get("name", "") for c_ in (spec_.get("initContainers") or []) + (spec_.get("containers") or [])
                       if not any(res in (((c_.get("resources") or {}).get(s_)) or {})
                                  for s_ in (("limits",) if sect == "limits" else ("requests", "limits")))]
            if lacking:
                out.append("failed quota: %s: must specify %s for: %s" % (q["metadata"]["name"], key, ",".join(lacking)))
    # RuntimeClass admission (plugin/pkg/admission/runtimeclass): the class must exist, or the pod is refused. A
    # class deploy/ does not create is a prerequisite, and deploy/README.md must name it with that refusal.
    rc_ = spec_.get("runtimeClassName")
    if rc_ and rc_ not in runtime_classes and ('pod rejected: RuntimeClass "%s" not found' % rc_) not in dreadme:
        out.append('pod rejected: RuntimeClass "%s" not found (deploy/ creates no such RuntimeClass, and '
                   'deploy/README.md does not say it is a prerequisite and what its absence looks like)' % rc_)
    return out


def admit(what, meta, spec_, ns, pod_name, floor=None):
    """Check that a pod with this metadata and spec is admitted in namespace ns. floor: the least level to hold it
    to where its namespace is not deploy/'s (the examples: a user's namespace)."""
    meta, spec_ = meta or {}, spec_ or {}
    if ns not in ns_policy and floor is None:
        check("%s: lands in a namespace deploy/ creates" % what, False,
              "namespace %r; deploy/ creates %s" % (ns, sorted(ns_policy)))
        return
    level, version = ns_policy.get(ns, pss.DEFAULT_POLICY)
    why = ""
    if floor and LEVEL_ORDER[floor] > LEVEL_ORDER[level]:
        level, why = floor, ", as a namespace of a cluster that enforces at least %s" % floor
    res = pss.evaluate(meta, spec_, level)
    check("%s: admitted in namespace %s (Pod Security %s:%s%s)" % (what, ns, level, version, why), not res,
          pss.message(pod_name, level, res, version))
    if ns in PRIVILEGED_FOR:
        extra = [(r, d) for r, d in pss.evaluate(meta, spec_, "baseline") if r not in PRIVILEGED_FOR[ns]]
        check("%s: nothing beyond baseline in %s but %s" % (what, ns, ", ".join(sorted(PRIVILEGED_FOR[ns]))),
              not extra, pss.forbidden_detail(extra))
    probs = admission_problems(ns, spec_)
    check("%s: no other admission plugin refuses it (ServiceAccount, Priority, ResourceQuota, RuntimeClass)" % what,
          not probs, 'pods "%s" is forbidden: %s' % (pod_name, "; ".join(probs)))


def pod_templates(objs):
    """(kind/name, namespace, template) of every object that makes pods from a template."""
    for o in objs:
        spec_ = o.get("spec") or {}
        tmpl_ = spec_.get("template") or ((spec_.get("jobTemplate") or {}).get("spec") or {}).get("template")
        if isinstance(tmpl_, dict) and isinstance(tmpl_.get("spec"), dict):
            yield "%s/%s" % (o.get("kind"), o["metadata"].get("name")), o["metadata"].get("namespace"), tmpl_


templates = list(pod_templates(all_objs))
check("the pod templates of deploy/ and its components include the Deployment's and the node agent DaemonSet's",
      {"DaemonSet/tessera-node-agent", "Deployment/tessera-scheduler"} <= {w for w, _, _ in templates},
      str([w for w, _, _ in templates]))
for what, ns, tmpl_ in templates:
    admit("pods of %s" % what, tmpl_.get("metadata"), tmpl_.get("spec"), ns,
          "%s-%s" % (what.split("/", 1)[1], "7c9f5d8b6d-q4x2n" if what.startswith("Deployment/") else "x7k2p"))
for path, o in example_pods:
    admit("%s (%s)" % (rel(path), o["metadata"]["name"]),
          o.get("metadata"), o.get("spec"), o["metadata"].get("namespace") or "default", o["metadata"]["name"],
          floor="baseline")

# -- the pods tessera makes at run time, from the real code
TEST_BIN = os.path.join(ROOT, "build", "tessera-tests")
if not os.access(TEST_BIN, os.X_OK):
    print("# SKIP the reservation pods and webhook-patched shares of a deployed tessera: build/tessera-tests is not "
          "built (run make)")
else:
    made = tempfile.mkdtemp(prefix="tessera-admission-")
    try:
        run_ = subprocess.run([TEST_BIN, "deployed_pods_for_admission"], capture_output=True, text=True,
                              env=dict(os.environ, TESSERA_ADMISSION_OBJECTS=made), timeout=120)
        seen = {}
        for f_ in sorted(os.listdir(made)):
            with open(os.path.join(made, f_)) as fh:
                seen[f_] = json.load(fh)
        want_files = {"reservation-pod.json", "reservation-mps-pod.json"} | {"share-%s-%s.json" % (k, s) for k in (R_, B_)
                                                  for s in ("submitted", "admitted")}
        check("build/tessera-tests deployed_pods_for_admission runs tessera as deploy/ does through two soft shares' "
              "life and writes the pods it made", run_.returncode == 0 and want_files <= set(seen),
              (run_.stdout + run_.stderr).strip()[-400:] + " files: %s" % sorted(seen))
        # reservation*.json: every reservation pod the test captured (one per kind of reservation it makes)
        for rsv in [seen[f_] for f_ in sorted(seen) if f_.startswith("reservation")]:
            rmeta, rspec = rsv.get("metadata") or {}, rsv.get("spec") or {}
            rns = rmeta.get("namespace")
            admit("a reservation pod as the extender creates it (extender/delivery/reservation.c)", rmeta, rspec, rns,
                  rmeta.get("name", "tessera-rsv"))
            # Authorization: the extender creates it, with its own ServiceAccount (the Deployment's), and
            # tessera-reserve inside reads and annotates it with the pod's (RBAC: an allowed verb is granted by a
            # Role of that namespace or a ClusterRole, through a binding to that ServiceAccount).
            def can(sa_ns, sa, verb, resource, ns):
                for b_ in all_objs:
                    if b_.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
                        continue
                    if b_.get("kind") == "RoleBinding" and b_["metadata"].get("namespace") != ns:
                        continue
                    if {"kind": "ServiceAccount", "name": sa, "namespace": sa_ns} not in (b_.get("subjects") or []):
                        continue
                    ref = b_.get("roleRef") or {}
                    for r_ in all_objs:
                        if r_.get("kind") == ref.get("kind") and r_["metadata"].get("name") == ref.get("name") and (
                                r_.get("kind") == "ClusterRole" or r_["metadata"].get("namespace") == ns):
                            if verb in grants(r_, False).get(("", resource), set()):
                                return True
                return False
            xsa, xns = pod.get("serviceAccountName"), dep["metadata"].get("namespace")
            check("the extender's ServiceAccount %s/%s may create pods in %s, where its reservation pods go" %
                  (xns, xsa, rns), can(xns, xsa, "create", "pods", rns),
                  'pods is forbidden: User "system:serviceaccount:%s:%s" cannot create resource "pods" in API group "" '
                  'in the namespace "%s"' % (xns, xsa, rns))
            rsa = rspec.get("serviceAccountName") or "default"
            check("the reservation pod's ServiceAccount %s/%s may get and patch pods in %s (tessera-reserve annotates "
                  "its own pod)" % (rns, rsa, rns),
                  can(rns, rsa, "get", "pods", rns) and can(rns, rsa, "patch", "pods", rns))
        for kind_ in (R_, B_):
            sub, adm = seen.get("share-%s-submitted.json" % kind_), seen.get("share-%s-admitted.json" % kind_)
            if not (sub and adm):
                continue
            before = pss.evaluate(sub.get("metadata"), sub.get("spec"), kind_)
            after = pss.evaluate(adm.get("metadata"), adm.get("spec"), kind_)
            check("a %s-clean share stays %s-clean through the webhook of a deployed tessera (as stored)" % (kind_, kind_),
                  not before and not after,
                  "the test's pod: %s; after the webhook: %s" % (
                      pss.forbidden_detail(before) or "clean",
                      pss.message(adm["metadata"].get("name", "share"), kind_, after) if after else "clean"))
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        check("build/tessera-tests deployed_pods_for_admission writes the pods tessera made", False, str(e))
    finally:
        shutil.rmtree(made, ignore_errors=True)

# ---- tessera-sim sweep --emit-job: the Indexed Job that runs a sweep on the cluster -------
# What an Indexed Job is: batch/v1 JobSpec.completionMode "Indexed" gives each pod an index
# 0..completions-1 (env JOB_COMPLETION_INDEX, annotation batch.kubernetes.io/job-completion-index)
# and completes when every index has succeeded once (kubernetes.io/docs/tasks/job/
# indexed-parallel-processing-static/; the JobSpec API reference).
SIM_BIN = "/usr/local/bin/tessera-sim"
OPENB_IN_IMAGE = "/usr/share/tessera/openb"
sim = os.path.join(ROOT, "build", "tessera-sim")
if not os.access(sim, os.X_OK):
    print("# SKIP sweep Job checks: build/tessera-sim not built (make build/tessera-sim)")
else:
    try:
        cf_runtime = "\n".join(last)
    except NameError:
        cf_runtime = ""
    check("runtime stage carries tessera-sim at %s and the openb trace at %s (the sweep Job's command and --data)"
          % (SIM_BIN, OPENB_IN_IMAGE), SIM_BIN in cf_runtime and OPENB_IN_IMAGE in cf_runtime)
    SHARDS = 3
    # openb cells (2 policies x 2 seeds) and replay cells over both replay axes (2 scales x 2
    # sharing x 2 policies x 1 trace seed; scale 1 is 300 workloads, scale 2 600: fast)
    grid = ["--pod-lists", "default", "--policies", "fgd,fgd-pack@online", "--seeds", "42,43", "--tune", "0.2",
            "--replay-seeds", "1", "--replay-scales", "1,2", "--replay-sharing", "as-is,whole"]
    NCELLS = 2 * 2 + 2 * 2 * 2 * 1
    emitted = subprocess.run([sim, "sweep"] + grid + ["--emit-job", "--shards", str(SHARDS), "--parallelism", "2"],
                             capture_output=True, text=True)
    docs = [d for d in yaml.safe_load_all(emitted.stdout) if d] if emitted.returncode == 0 else []
    check("tessera-sim sweep --emit-job prints one YAML document", len(docs) == 1,
          emitted.stderr.strip()[-300:] or emitted.stdout[:300])
    if docs:
        job = docs[0]
        spec = job.get("spec", {})
        tmpl = spec.get("template", {}).get("spec", {})
        ctrs = tmpl.get("containers", [])
        c0 = ctrs[0] if ctrs else {}
        cmd = c0.get("command", []) + c0.get("args", [])
        def argval(name):
            return cmd[cmd.index(name) + 1] if name in cmd and cmd.index(name) + 1 < len(cmd) else None
        check("sweep Job: batch/v1 Job in namespace %s" % NAMESPACE,
              job.get("apiVersion") == "batch/v1" and job.get("kind") == "Job"
              and job.get("metadata", {}).get("namespace") == NAMESPACE, str(job.get("metadata")))
        check("sweep Job: completionMode Indexed, completions = --shards, 1 <= parallelism <= completions",
              spec.get("completionMode") == "Indexed" and spec.get("completions") == SHARDS
              and 1 <= spec.get("parallelism", 0) <= SHARDS, str({k: spec.get(k) for k in ("completionMode", "completions", "parallelism")}))
        check("sweep Job: restartPolicy Never (a failed index is retried as a new pod)", tmpl.get("restartPolicy") == "Never")
        check("sweep Job: one container, image %s (the image deploy/Containerfile builds)" % EXTENDER_IMAGE,
              len(ctrs) == 1 and c0.get("image") == EXTENDER_IMAGE, str([c.get("image") for c in ctrs]))
        psc, csc = tmpl.get("securityContext", {}), c0.get("securityContext", {})
        check("sweep Job: runs as non-root UID %d, no privilege escalation, read-only root filesystem" % RUNTIME_UID,
              psc.get("runAsNonRoot") is True and psc.get("runAsUser") == RUNTIME_UID
              and csc.get("allowPrivilegeEscalation") is False and csc.get("readOnlyRootFilesystem") is True, str((psc, csc)))
        req = c0.get("resources", {}).get("requests", {})
        check("sweep Job: CPU and memory requested", "cpu" in req and "memory" in req, str(req))
        admit("pods of the sweep Job (tessera-sim sweep --emit-job)", spec.get("template", {}).get("metadata"), tmpl,
              job.get("metadata", {}).get("namespace"), "%s-0-x7k2p" % job.get("metadata", {}).get("name", "sweep"))
        check("sweep Job: runs %s sweep on its shard (--shards %d --shard-index env) with --data %s"
              % (SIM_BIN, SHARDS, OPENB_IN_IMAGE),
              cmd[:2] == [SIM_BIN, "sweep"] and argval("--shards") == str(SHARDS) and argval("--shard-index") == "env"
              and argval("--data") == OPENB_IN_IMAGE, str(cmd))
        out_dir = argval("--out")
        mounts = {m.get("mountPath"): m.get("name") for m in c0.get("volumeMounts", [])}
        vols = {v.get("name"): v for v in tmpl.get("volumes", [])}
        check("sweep Job: --out is a mounted PersistentVolumeClaim (cell files outlive the pods)",
              out_dir in mounts and "persistentVolumeClaim" in vols.get(mounts.get(out_dir), {}), str((out_dir, mounts, vols)))
        check("sweep Job: the grid of the command line is the one asked for",
              all(argval(grid[i]) == grid[i + 1] for i in range(0, len(grid), 2)), str(cmd))
        # Run the Job's command for every index, as the Job controller would (local binary and
        # data, a scratch --out): every cell must be written exactly once, and merge must accept them.
        scratch = tempfile.mkdtemp(prefix="tessera-sweep-job-")
        try:
            local = [sim] + cmd[1:]
            local[local.index("--data") + 1] = os.path.join(ROOT, "data", "openb")
            local[local.index("--out") + 1] = scratch
            runs, per_index = [], []
            for i in range(spec.get("completions", 0)):
                before = set(os.listdir(os.path.join(scratch, "cells"))) if os.path.isdir(os.path.join(scratch, "cells")) else set()
                r = subprocess.run(local, capture_output=True, text=True, env=dict(os.environ, JOB_COMPLETION_INDEX=str(i)))
                runs.append(r.returncode)
                after = set(os.listdir(os.path.join(scratch, "cells")))
                per_index.append(len(after - before))
            cells = sorted(os.listdir(os.path.join(scratch, "cells")))
            check("sweep Job: every index runs (exit 0) and the %d cells are written once across the %d indices"
                  % (NCELLS, SHARDS), runs == [0] * SHARDS and sum(per_index) == NCELLS and len(cells) == NCELLS,
                  str((runs, per_index, cells)))
            replays = []
            for name in cells:
                with open(os.path.join(scratch, "cells", name)) as f:
                    cell = json.load(f)
                if cell.get("kind") == "replay":
                    replays.append((cell.get("scale"), cell.get("sharing"), cell.get("policy")))
            want = [(sc, sh, p) for sc in (1, 2) for sh in ("as-is", "whole") for p in ("fgd", "fgd-pack@online")]
            check("sweep Job: one replay cell per (scale, sharing, policy), in that order", replays == want, str(replays))
            merged = subprocess.run([sim, "merge", scratch], capture_output=True, text=True)
            rows = set()
            if os.path.exists(os.path.join(scratch, "replay.csv")):
                with open(os.path.join(scratch, "replay.csv")) as f:
                    rows = {(r["scale"], r["sharing"], r["policy"]) for r in csv.DictReader(f)}
            check("tessera-sim merge joins the Job's cell files, replay.csv with scale and sharing columns",
                  merged.returncode == 0 and os.path.exists(os.path.join(scratch, "table.md"))
                  and rows == {(str(sc), sh, p) for sc, sh, p in want}, merged.stderr.strip()[-300:] or str(rows))
            noenv = subprocess.run(local, capture_output=True, text=True,
                                   env={k: v for k, v in os.environ.items() if k != "JOB_COMPLETION_INDEX"})
            check("sweep --shard-index env outside a Job fails with a clear message",
                  noenv.returncode == 2 and "JOB_COMPLETION_INDEX" in noenv.stderr, noenv.stderr.strip())
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
