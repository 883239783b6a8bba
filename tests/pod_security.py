"""The Pod Security Standards' "restricted" profile (Kubernetes 1.31-1.33, which rota
claims), as a check over a pod spec: every control of the baseline profile, then the
restricted ones. Written from https://kubernetes.io/docs/concepts/security/pod-security-standards/
so the rendered manifests can be checked offline, the way the Pod Security admission
controller with `enforce: restricted` would check them."""

from __future__ import annotations

from typing import Any

# Volume types the restricted profile allows.
ALLOWED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
VOLUME_FIELDS = ALLOWED_VOLUMES | {
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
    "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
    "vsphereVolume", "quobyte", "azureDisk", "portworxVolume", "scaleIO", "storageos",
    "photonPersistentDisk",
}  # fmt: skip


def pod_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs a manifest creates (Deployment, Job, CronJob, Pod)."""
    kind = doc.get("kind")
    if kind == "Pod":
        return [doc["spec"]]
    if kind == "CronJob":
        return [doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]]
    if kind in ("Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet"):
        return [doc["spec"]["template"]["spec"]]
    return []


def violations(pod: dict[str, Any]) -> list[str]:
    """Every way `pod` (a PodSpec) breaks the restricted profile; [] when it passes."""
    found: list[str] = []
    pod_ctx = pod.get("securityContext") or {}
    containers = [
        *pod.get("initContainers", []),
        *pod.get("containers", []),
        *pod.get("ephemeralContainers", []),
    ]
    # --- baseline ---
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            found.append(f"{flag} is set")
    if (pod_ctx.get("windowsOptions") or {}).get("hostProcess"):
        found.append("pod: windowsOptions.hostProcess")
    for volume in pod.get("volumes", []):
        kinds = [k for k in volume if k in VOLUME_FIELDS]
        for kind in kinds:
            if kind not in ALLOWED_VOLUMES:
                found.append(f"volume {volume.get('name')}: type {kind} is not allowed")
    for sysctl in pod_ctx.get("sysctls", []):
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(f"sysctl {sysctl.get('name')} is not a safe one")
    found += _selinux("pod", pod_ctx)
    found += _apparmor("pod", pod_ctx)
    pod_seccomp = (pod_ctx.get("seccompProfile") or {}).get("type")
    if pod_seccomp is not None and pod_seccomp not in ("RuntimeDefault", "Localhost"):
        found.append(f"pod: seccompProfile {pod_seccomp}")
    pod_non_root = pod_ctx.get("runAsNonRoot")
    if pod_ctx.get("runAsUser") == 0:
        found.append("pod: runAsUser 0")
    for c in containers:
        name = c.get("name", "?")
        ctx = c.get("securityContext") or {}
        if ctx.get("privileged"):
            found.append(f"{name}: privileged")
        if (ctx.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{name}: windowsOptions.hostProcess")
        for port in c.get("ports", []):
            if port.get("hostPort"):
                found.append(f"{name}: hostPort {port['hostPort']}")
        if ctx.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount {ctx['procMount']}")
        found += _selinux(name, ctx)
        found += _apparmor(name, ctx)
        # --- restricted ---
        if ctx.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation must be false")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"{name}: capabilities must drop ALL")
        extra = [cap for cap in caps.get("add") or [] if cap != "NET_BIND_SERVICE"]
        if extra:
            found.append(f"{name}: capabilities add {extra}")
        non_root = ctx.get("runAsNonRoot", pod_non_root)
        if non_root is not True:
            found.append(f"{name}: runAsNonRoot must be true (pod or container)")
        if ctx.get("runAsUser") == 0:
            found.append(f"{name}: runAsUser 0")
        seccomp = (ctx.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost")
    return found


def _selinux(where: str, ctx: dict[str, Any]) -> list[str]:
    options = ctx.get("seLinuxOptions") or {}
    found = []
    if options.get("type", "") not in SELINUX_TYPES:
        found.append(f"{where}: seLinuxOptions.type {options['type']}")
    for key in ("user", "role"):
        if options.get(key):
            found.append(f"{where}: seLinuxOptions.{key} is set")
    return found


def _apparmor(where: str, ctx: dict[str, Any]) -> list[str]:
    kind = (ctx.get("appArmorProfile") or {}).get("type")
    if kind is not None and kind not in ("RuntimeDefault", "Localhost"):
        return [f"{where}: appArmorProfile {kind}"]
    return []
