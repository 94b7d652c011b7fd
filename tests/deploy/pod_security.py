"""Pod Security admission, as the API server runs it, for tests/deploy/check_manifests.py.

    import pod_security as pss
    pss.namespace_policy(namespace_object)       -> ("restricted", "latest")
    pss.evaluate(pod_metadata, pod_spec, level)  -> [(reason, detail), ...]  ([] = admitted)
    pss.message(pod_name, level, results)        -> the API server's refusal, word for word in form:
        pods "x" is forbidden: violates PodSecurity "restricted:latest": runAsUser=0 (pod must not set runAsUser=0)

What it implements: the Pod Security Standards
(https://kubernetes.io/docs/concepts/security/pod-security-standards/), as the checks of the policy package of
k8s.io/pod-security-admission implement them (kubernetes/kubernetes,
staging/src/k8s.io/pod-security-admission/policy/check_<id>.go), at policy version "latest" on a v1.36 API server:
the newest revision of every check registered there. Each check below names its file. Where the published page
and the code disagree (the page lists no `image` volume for restricted and stops at the 1.29 sysctls), the code
is followed: it is what admits or refuses a pod.

How the API server puts them together (policy/registry.go, policy/checks.go, admission/admission.go):
  - privileged: nothing is checked;
  - baseline: the baseline checks, in the order their files register them (file-name order);
  - restricted: the baseline checks, minus those a restricted check replaces (hostPathVolumes by
    restrictedVolumes, capabilities_baseline by capabilities_restricted, seccompProfile_baseline by
    seccompProfile_restricted, procMount by procMount_restricted), then the restricted checks;
  - a refused pod gets `violates PodSecurity "<level>:<version>": ` and, per failed check, its reason with its
    detail in parentheses, joined by ", " (AggregateCheckResult.ForbiddenDetail).
Containers are visited as policy/visitor.go does: init containers, containers, then ephemeral containers; a
native sidecar (an init container with restartPolicy Always) is an init container like any other.

Not implemented: pinned policy versions (only "latest"), checks registered for policy versions above 1.36 on
the main branch (ulimits 1.37, cgroupOptions 1.38, the 1.37 sysctls), namespace and user exemptions of the
AdmissionConfiguration, and the Windows-only fields beyond hostProcess (a pod with spec.os.name windows is
exempt from the three restricted checks that exempt it).
"""

LEVELS = ("privileged", "baseline", "restricted")
LABEL_PREFIX = "pod-security.kubernetes.io/"
# The API server's default when a namespace has no enforce label (the PodSecurity plugin's built-in defaults:
# privileged, latest, for enforce, audit and warn; a cluster may configure others in its AdmissionConfiguration).
DEFAULT_POLICY = ("privileged", "latest")


# ---- helpers as policy/helpers.go writes its messages -----------------------------------------------------
def _plural(singular, plural, n):
    return singular if n == 1 else plural


def _join_quote(items):
    return '"' + '", "'.join(items) + '"' if items else ""


def _containers(spec):
    """Init containers, containers, then ephemeral containers, in visitor.go's order."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            yield c or {}


def _sc(c):
    return c.get("securityContext") or {}


def _pod_sc(spec):
    return spec.get("securityContext") or {}


def _windows(spec):
    return ((spec.get("os") or {}).get("name")) == "windows"


def _user_namespace(spec):
    # policy/helpers.go relaxPolicyForUserNamespacePod: spec.hostUsers explicitly false (KEP-127). From policy
    # version 1.35 on, unconditionally (the UserNamespacesPodSecurityStandards gate was dropped).
    return spec.get("hostUsers") is False


def _setters(pod_bad, containers_bad):
    """["pod", 'containers "a", "b"'] as the checks list who set a forbidden value."""
    out = ["pod"] if pod_bad else []
    if containers_bad:
        out.append("%s %s" % (_plural("container", "containers", len(containers_bad)), _join_quote(containers_bad)))
    return out


# ---- baseline checks ----------------------------------------------------------------------------------------
def check_app_armor(meta, spec):
    """check_appArmorProfile.go (1.0; the fields since the 1.30 AppArmor API): securityContext.appArmorProfile.type
    of the pod and of every container must be RuntimeDefault or Localhost when set; the deprecated annotations
    container.apparmor.security.beta.kubernetes.io/* must be empty, runtime/default or localhost/*."""
    ok_types = ("RuntimeDefault", "Localhost")
    bad_values = set()
    pod_prof = _pod_sc(spec).get("appArmorProfile")
    pod_bad = pod_prof is not None and (pod_prof or {}).get("type") not in ok_types
    if pod_bad:
        bad_values.add(str((pod_prof or {}).get("type") or ""))
    bad_containers = []
    for c in _containers(spec):
        prof = _sc(c).get("appArmorProfile")
        if prof is not None and (prof or {}).get("type") not in ok_types:
            bad_containers.append(c.get("name", ""))
            bad_values.add(str((prof or {}).get("type") or ""))
    setters = _setters(pod_bad, bad_containers)
    anns = []
    for k, v in sorted(((meta.get("annotations") or {}).items())):
        if k.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
                v == "" or v == "runtime/default" or str(v).startswith("localhost/")):
            anns.append('%s="%s"' % (k, v))
    values = sorted(bad_values) + anns
    if anns:
        setters.append(_plural("annotation", "annotations", len(anns)))
    if not setters:
        return None
    return (_plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
            "%s must not set AppArmor profile type to %s" % (" and ".join(setters), _join_quote(values)))


# The runtime's default set, as the baseline check lists it (check_capabilities_baseline.go, unchanged since 1.0).
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def check_capabilities_baseline(meta, spec):
    """check_capabilities_baseline.go: capabilities.add only from the default set (NET_RAW is not in it)."""
    bad, caps = [], set()
    for c in _containers(spec):
        added = [str(x) for x in ((_sc(c).get("capabilities") or {}).get("add") or [])]
        extra = [x for x in added if x not in BASELINE_CAPABILITIES]
        if extra:
            bad.append(c.get("name", ""))
            caps.update(extra)
    if not bad:
        return None
    return ("non-default capabilities", "%s %s must not include %s in securityContext.capabilities.add"
            % (_plural("container", "containers", len(bad)), _join_quote(bad), _join_quote(sorted(caps))))


def check_host_namespaces(meta, spec):
    """check_hostNamespaces.go: hostNetwork, hostPID, hostIPC undefined or false."""
    on = ["%s=true" % k for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]
    return ("host namespaces", ", ".join(on)) if on else None


def check_host_path_volumes(meta, spec):
    """check_hostPathVolumes.go: no volume of type hostPath (replaced by restrictedVolumes in restricted)."""
    names = [v.get("name", "") for v in spec.get("volumes") or [] if (v or {}).get("hostPath") is not None]
    if not names:
        return None
    return ("hostPath volumes", "%s %s" % (_plural("volume", "volumes", len(names)), _join_quote(names)))


def check_host_ports(meta, spec):
    """check_hostPorts.go: ports[*].hostPort undefined or 0, in every kind of container."""
    bad, ports = [], set()
    for c in _containers(spec):
        used = [str(p.get("hostPort")) for p in c.get("ports") or [] if (p or {}).get("hostPort") not in (None, 0)]
        if used:
            bad.append(c.get("name", ""))
            ports.update(used)
    if not bad:
        return None
    return ("hostPort", "%s %s %s %s %s" % (_plural("container", "containers", len(bad)), _join_quote(bad),
                                             _plural("uses", "use", len(bad)),
                                             _plural("hostPort", "hostPorts", len(ports)), ", ".join(sorted(ports))))


def check_host_probes(meta, spec):
    """check_hostProbesAndhostLifecycle.go (policy 1.34): no .host in the httpGet or tcpSocket of a liveness,
    readiness or startup probe, nor of a postStart or preStop hook."""
    bad, hosts = set(), set()
    for c in _containers(spec):
        handlers = [c.get(p) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [(c.get("lifecycle") or {}).get(h) for h in ("postStart", "preStop")]
        for h in handlers:
            for kind in ("httpGet", "tcpSocket"):
                host = ((h or {}).get(kind) or {}).get("host")
                if host:
                    bad.add(c.get("name", ""))
                    hosts.add(str(host))
    if not bad:
        return None
    return ("probe or lifecycle host", "%s %s %s %s %s" % (
        _plural("container", "containers", len(bad)), _join_quote(sorted(bad)), _plural("uses", "use", len(bad)),
        _plural("probe or lifecycle host", "probe or lifecycle hosts", len(hosts)), _join_quote(sorted(hosts))))


def check_privileged(meta, spec):
    """check_privileged.go: securityContext.privileged undefined or false."""
    bad = [c.get("name", "") for c in _containers(spec) if _sc(c).get("privileged") is True]
    if not bad:
        return None
    return ("privileged", "%s %s must not set securityContext.privileged=true"
            % (_plural("container", "containers", len(bad)), _join_quote(bad)))


def _proc_mount(spec):
    bad, types = [], set()
    for c in _containers(spec):
        pm = _sc(c).get("procMount")
        if pm is not None and pm != "Default":
            bad.append(c.get("name", ""))
            types.add(str(pm))
    if not bad:
        return None
    return ("procMount", "%s %s must not set securityContext.procMount to %s"
            % (_plural("container", "containers", len(bad)), _join_quote(bad), _join_quote(sorted(types))))


def check_proc_mount_baseline(meta, spec):
    """check_procMount_baseline.go (policy 1.35): procMount undefined or Default, unless the pod has its own user
    namespace (hostUsers: false)."""
    return None if _user_namespace(spec) else _proc_mount(spec)


# check_seLinuxOptions.go: the types allowed since policy 1.31 (container_engine_t was added then).
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def check_selinux(meta, spec):
    """check_seLinuxOptions.go (1.31): seLinuxOptions.type one of SELINUX_TYPES, .user and .role unset."""
    bad_types, user, role = set(), False, False

    def bad(opts):
        nonlocal user, role
        if opts is None:
            return False
        opts = opts or {}
        wrong = False
        if (opts.get("type") or "") not in SELINUX_TYPES:
            bad_types.add(opts.get("type"))
            wrong = True
        if opts.get("user"):
            user = wrong = True
        if opts.get("role"):
            role = wrong = True
        return wrong
    pod_bad = bad(_pod_sc(spec).get("seLinuxOptions"))
    bad_containers = [c.get("name", "") for c in _containers(spec) if bad(_sc(c).get("seLinuxOptions"))]
    setters = _setters(pod_bad, bad_containers)
    if not setters:
        return None
    data = []
    if bad_types:
        data.append("%s %s" % (_plural("type", "types", len(bad_types)), _join_quote(sorted(bad_types))))
    if user:
        data.append("user may not be set")
    if role:
        data.append("role may not be set")
    return ("seLinuxOptions", "%s set forbidden securityContext.seLinuxOptions: %s"
            % (" and ".join(setters), "; ".join(data)))


SECCOMP_OK = ("RuntimeDefault", "Localhost")


def _seccomp(spec, require):
    """check_seccompProfile_baseline.go (require=False: a type, when set, must be RuntimeDefault or Localhost) and
    check_seccompProfile_restricted.go (require=True: and every container must have one, its own or the pod's)."""
    values = set()
    prof = _pod_sc(spec).get("seccompProfile")
    pod_bad = prof is not None and (prof or {}).get("type") not in SECCOMP_OK
    if pod_bad:
        values.add(str((prof or {}).get("type") or ""))
    pod_set = prof is not None and not pod_bad
    explicit, implicit = [], []
    for c in _containers(spec):
        cp = _sc(c).get("seccompProfile")
        if cp is not None:
            if (cp or {}).get("type") not in SECCOMP_OK:
                explicit.append(c.get("name", ""))
                values.add(str((cp or {}).get("type") or ""))
        elif not pod_set:
            implicit.append(c.get("name", ""))
    setters = _setters(pod_bad, explicit)
    if setters:
        return ("seccompProfile", "%s must not set securityContext.seccompProfile.type to %s"
                % (" and ".join(setters), _join_quote(sorted(values))))
    if require and implicit:
        return ("seccompProfile", 'pod or %s %s must set securityContext.seccompProfile.type to "RuntimeDefault" '
                'or "Localhost"' % (_plural("container", "containers", len(implicit)), _join_quote(implicit)))
    return None


def check_seccomp_baseline(meta, spec):
    return _seccomp(spec, False)


# check_sysctls.go: the "safe" sysctls (namespaced and isolated from other pods), as of policy 1.32.
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",                                   # 1.0
    "net.ipv4.ip_local_reserved_ports",                                      # 1.27
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",                                         # 1.29
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",                                # 1.32
}


def check_sysctls(meta, spec):
    """check_sysctls.go: spec.securityContext.sysctls[*].name only from SAFE_SYSCTLS (the API has them on the pod
    only)."""
    bad = [str((s or {}).get("name")) for s in _pod_sc(spec).get("sysctls") or []
           if (s or {}).get("name") not in SAFE_SYSCTLS]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None


def check_host_process(meta, spec):
    """check_windowsHostProcess.go: securityContext.windowsOptions.hostProcess undefined or false."""
    def on(sc):
        return ((sc.get("windowsOptions") or {}).get("hostProcess")) is True
    setters = _setters(on(_pod_sc(spec)), [c.get("name", "") for c in _containers(spec) if on(_sc(c))])
    if not setters:
        return None
    return ("hostProcess", "%s must not set securityContext.windowsOptions.hostProcess=true" % " and ".join(setters))


# ---- restricted checks ------------------------------------------------------------------------------------
def check_allow_privilege_escalation(meta, spec):
    """check_allowPrivilegeEscalation.go (1.25): every container sets allowPrivilegeEscalation: false (there is no
    pod-level field); Windows pods are exempt."""
    if _windows(spec):
        return None
    bad = [c.get("name", "") for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return ("allowPrivilegeEscalation != false", "%s %s must set securityContext.allowPrivilegeEscalation=false"
            % (_plural("container", "containers", len(bad)), _join_quote(bad)))


def check_capabilities_restricted(meta, spec):
    """check_capabilities_restricted.go (1.25): every container drops ALL and adds nothing but NET_BIND_SERVICE;
    Windows pods are exempt."""
    if _windows(spec):
        return None
    no_drop, adding, caps = [], [], set()
    for c in _containers(spec):
        caps_ = _sc(c).get("capabilities")
        if caps_ is None:
            no_drop.append(c.get("name", ""))
            continue
        if "ALL" not in [str(x) for x in (caps_ or {}).get("drop") or []]:
            no_drop.append(c.get("name", ""))
        extra = [str(x) for x in (caps_ or {}).get("add") or [] if x != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c.get("name", ""))
            caps.update(extra)
    details = []
    if no_drop:
        details.append('%s %s must set securityContext.capabilities.drop=["ALL"]'
                       % (_plural("container", "containers", len(no_drop)), _join_quote(no_drop)))
    if adding:
        details.append("%s %s must not include %s in securityContext.capabilities.add"
                       % (_plural("container", "containers", len(adding)), _join_quote(adding),
                          _join_quote(sorted(caps))))
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def check_proc_mount_restricted(meta, spec):
    """check_procMount_restricted.go (1.35): procMount undefined or Default, user namespace or not."""
    return _proc_mount(spec)


# check_restrictedVolumes.go: the inline volume sources restricted allows (image since Kubernetes 1.33, PR
# kubernetes/kubernetes#130394); every other source is reported by its field name, "unknown" if none is known.
RESTRICTED_VOLUME_OK = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
                        "projected", "secret")
RESTRICTED_VOLUME_NAMED = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
                           "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
                           "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume",
                           "scaleIO", "storageos")


def check_restricted_volumes(meta, spec):
    """check_restrictedVolumes.go: only the volume types of RESTRICTED_VOLUME_OK."""
    bad, types = [], set()
    for v in spec.get("volumes") or []:
        v = v or {}
        if any(v.get(k) is not None for k in RESTRICTED_VOLUME_OK):
            continue
        bad.append(v.get("name", ""))
        types.add(next((k for k in RESTRICTED_VOLUME_NAMED if v.get(k) is not None), "unknown"))
    if not bad:
        return None
    return ("restricted volume types", "%s %s %s %s %s" % (
        _plural("volume", "volumes", len(bad)), _join_quote(bad), _plural("uses", "use", len(bad)),
        _plural("restricted volume type", "restricted volume types", len(types)), _join_quote(sorted(types))))


def _explicit_or_inherited(spec, field, bad_value, pod_ok):
    """Who explicitly sets `field` to bad_value (pod, containers), and which containers neither set it nor inherit
    an acceptable pod value (pod_ok: the pod-level value makes an unset container fine)."""
    pod_v = _pod_sc(spec).get(field)
    explicit, implicit = [], []
    for c in _containers(spec):
        v = _sc(c).get(field)
        if v is not None:
            if v == bad_value:
                explicit.append(c.get("name", ""))
        elif not pod_ok(pod_v):
            implicit.append(c.get("name", ""))
    return pod_v == bad_value, explicit, implicit


def check_run_as_non_root(meta, spec):
    """check_runAsNonRoot.go (1.35): runAsNonRoot true on the pod (containers inherit it) or on every container;
    false anywhere is refused; skipped for a pod with its own user namespace (hostUsers: false)."""
    if _user_namespace(spec):
        return None
    pod_bad, explicit, implicit = _explicit_or_inherited(spec, "runAsNonRoot", False, lambda v: v is True)
    setters = _setters(pod_bad, explicit)
    if setters:
        return ("runAsNonRoot != true", "%s must not set securityContext.runAsNonRoot=false" % " and ".join(setters))
    if implicit:
        return ("runAsNonRoot != true", "pod or %s %s must set securityContext.runAsNonRoot=true"
                % (_plural("container", "containers", len(implicit)), _join_quote(implicit)))
    return None


def check_run_as_user(meta, spec):
    """check_runAsUser.go (1.35): runAsUser never 0, on the pod or a container (unset is fine); skipped for a pod
    with its own user namespace."""
    if _user_namespace(spec):
        return None
    pod_bad, explicit, _ = _explicit_or_inherited(spec, "runAsUser", 0, lambda v: True)
    setters = _setters(pod_bad, explicit)
    if not setters:
        return None
    return ("runAsUser=0", "%s must not set runAsUser=0" % " and ".join(setters))


def check_seccomp_restricted(meta, spec):
    """check_seccompProfile_restricted.go (1.25): Windows pods are exempt."""
    return None if _windows(spec) else _seccomp(spec, True)


# ---- the levels ---------------------------------------------------------------------------------------------
# (check, the restricted check that replaces it in restricted namespaces or None), in registration order.
BASELINE = [
    (check_app_armor, None),
    (check_capabilities_baseline, check_capabilities_restricted),
    (check_host_namespaces, None),
    (check_host_path_volumes, check_restricted_volumes),
    (check_host_ports, None),
    (check_host_probes, None),
    (check_privileged, None),
    (check_proc_mount_baseline, check_proc_mount_restricted),
    (check_selinux, None),
    (check_seccomp_baseline, check_seccomp_restricted),
    (check_sysctls, None),
    (check_host_process, None),
]
RESTRICTED = [check_allow_privilege_escalation, check_capabilities_restricted, check_proc_mount_restricted,
              check_restricted_volumes, check_run_as_non_root, check_run_as_user, check_seccomp_restricted]


def evaluate(meta, spec, level):
    """The checks the pod fails at level, as (reason, detail) in the API server's order; [] when admitted."""
    if level not in LEVELS:
        raise ValueError("unknown Pod Security level %r (one of %s)" % (level, ", ".join(LEVELS)))
    if level == "privileged":
        return []
    meta, spec = meta or {}, spec or {}
    checks = [c for c, over in BASELINE if level == "baseline" or over is None]
    if level == "restricted":
        checks += RESTRICTED
    return [r for r in (c(meta, spec) for c in checks) if r]


def forbidden_detail(results):
    """'reason (detail), reason (detail)', as AggregateCheckResult.ForbiddenDetail writes it."""
    return ", ".join("%s (%s)" % (r, d) if d else r for r, d in results)


def message(pod_name, level, results, version="latest"):
    """The API server's refusal of a pod (admission/admission.go, forbiddenResponse)."""
    return 'pods "%s" is forbidden: violates PodSecurity "%s:%s": %s' % (pod_name, level, version,
                                                                         forbidden_detail(results))


def namespace_policy(namespace):
    """(level, version) that a Namespace object's labels make the API server enforce; DEFAULT_POLICY without the
    label. Raises ValueError for a value the API server would not accept as a level."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    level = labels.get(LABEL_PREFIX + "enforce")
    if level is None:
        return DEFAULT_POLICY
    if level not in LEVELS:
        raise ValueError("%senforce=%r is not a level (%s)" % (LABEL_PREFIX, level, ", ".join(LEVELS)))
    return level, labels.get(LABEL_PREFIX + "enforce-version", "latest")
