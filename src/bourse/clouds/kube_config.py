"""Where a Kubernetes cluster is and how to authenticate to it: a kubeconfig's context, or the
pod's own service account when the coordinator runs in the cluster.

The kubeconfig is ``--kubeconfig`` (``BOURSE_KUBECONFIG``), else the first file of
``KUBECONFIG``, else ``~/.kube/config``; the context is ``--kube-context`` or the file's
``current-context``. Supported credentials: a bearer ``token`` (or ``tokenFile``), a client
certificate and key (files or ``-data``), and ``insecure-skip-tls-verify``. An ``exec`` or
``auth-provider`` plugin (``aws eks get-token``, ``gke-gcloud-auth-plugin``) is refused with
what to do instead: a service account token in the kubeconfig. In a pod (no kubeconfig,
``KUBERNETES_SERVICE_HOST`` set) the service account's token, CA and namespace are read from
``/var/run/secrets/kubernetes.io/serviceaccount``, as client-go's in-cluster config does.
"""

from __future__ import annotations

import base64
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_CLUSTER_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class KubeConfigError(ValueError):
    """The kubeconfig cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class KubeTarget:
    """One cluster as the client reaches it. ``verify``: a CA bundle path, True (the system's)
    or False (``insecure-skip-tls-verify``). ``cert``: (certificate, key) file paths."""

    server: str
    context: str
    namespace: str = "default"
    token: str | None = field(default=None, repr=False)
    verify: str | bool = True
    cert: tuple[str, str] | None = None

    @property
    def cluster(self) -> str:
        """The context as an offer's region: 1-64 of ``[A-Za-z0-9._-]``."""
        text = _CLUSTER_NAME.sub("-", self.context).strip("-.") or "cluster"
        return text[-64:].lstrip("-.") or "cluster"


def kubeconfig_path(given: str | None, env: Mapping[str, str] | None = None) -> Path | None:
    env = os.environ if env is None else env
    if given:
        return Path(given).expanduser()
    for part in env.get("KUBECONFIG", "").split(os.pathsep):
        if part.strip():
            return Path(part.strip()).expanduser()
    home = Path(env.get("HOME", str(Path.home()))) / ".kube" / "config"
    return home if home.exists() else None


def load(path: str | None = None, context: str | None = None, namespace: str | None = None,
         env: Mapping[str, str] | None = None) -> KubeTarget:
    """The cluster of ``context`` in the kubeconfig (see the module), or the in-cluster one."""
    env = os.environ if env is None else env
    found = kubeconfig_path(path, env)
    if found is None or (not found.exists() and not path):
        if env.get("KUBERNETES_SERVICE_HOST"):
            return in_cluster(env, namespace)
        raise KubeConfigError("no kubeconfig: give --kubeconfig PATH (or set KUBECONFIG), or "
                              "run the coordinator in the cluster with a service account")
    try:
        doc = yaml.safe_load(found.read_text())
    except OSError as exc:
        raise KubeConfigError(f"cannot read the kubeconfig {found}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise KubeConfigError(f"the kubeconfig {found} is not YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise KubeConfigError(f"the kubeconfig {found} is not a kubeconfig (no mapping)")
    return from_document(doc, context, namespace, base=found.parent)


def _named(doc: Mapping[str, Any], kind: str, name: str, where: str) -> Mapping[str, Any]:
    for item in doc.get(kind) or []:
        if isinstance(item, dict) and item.get("name") == name:
            inner = item.get(kind[:-1])
            if isinstance(inner, dict):
                return inner
    raise KubeConfigError(f"{where}: no {kind[:-1]} named {name!r} in the kubeconfig")


def from_document(doc: Mapping[str, Any], context: str | None, namespace: str | None,
                  base: Path) -> KubeTarget:
    name = context or doc.get("current-context")
    if not name:
        known = [c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)]
        raise KubeConfigError("the kubeconfig has no current-context: name one with "
                              f"--kube-context (it has: {', '.join(map(str, known)) or 'none'})")
    ctx = _named(doc, "contexts", str(name), f"context {name!r}")
    cluster = _named(doc, "clusters", str(ctx.get("cluster")), f"context {name!r}")
    user = _named(doc, "users", str(ctx.get("user")), f"context {name!r}") if ctx.get(
        "user") else {}
    server = str(cluster.get("server") or "")
    if not server.startswith(("https://", "http://")):
        raise KubeConfigError(f"context {name!r}: the cluster's server {server!r} is not an "
                              "http(s) URL")
    return KubeTarget(server=server.rstrip("/"), context=str(name),
                      namespace=namespace or str(ctx.get("namespace") or "default"),
                      token=_token(user, str(name), base), verify=_verify(cluster, base),
                      cert=_cert(user, base))


def _file(value: object, base: Path) -> str:
    path = Path(str(value)).expanduser()
    return str(path if path.is_absolute() else base / path)


def _data_file(data: object, suffix: str) -> str:
    """Inline ``-data`` written to a private temporary file (httpx/ssl read files)."""
    raw = base64.b64decode(str(data))
    fd, name = tempfile.mkstemp(prefix="bourse-kube-", suffix=suffix)
    with os.fdopen(fd, "wb") as out:
        out.write(raw)
    return name


def _verify(cluster: Mapping[str, Any], base: Path) -> str | bool:
    if cluster.get("insecure-skip-tls-verify"):
        return False
    if cluster.get("certificate-authority-data"):
        return _data_file(cluster["certificate-authority-data"], ".crt")
    if cluster.get("certificate-authority"):
        return _file(cluster["certificate-authority"], base)
    return True


def _cert(user: Mapping[str, Any], base: Path) -> tuple[str, str] | None:
    if user.get("client-certificate-data") and user.get("client-key-data"):
        return (_data_file(user["client-certificate-data"], ".crt"),
                _data_file(user["client-key-data"], ".key"))
    if user.get("client-certificate") and user.get("client-key"):
        return _file(user["client-certificate"], base), _file(user["client-key"], base)
    return None


def _token(user: Mapping[str, Any], context: str, base: Path) -> str | None:
    if user.get("exec") or user.get("auth-provider"):
        plugin = (user.get("exec") or {}).get("command") or (
            user.get("auth-provider") or {}).get("name", "a plugin")
        raise KubeConfigError(
            f"context {context!r} authenticates with {plugin!r} (an exec/auth-provider "
            "plugin), which bourse does not run: give it a service account token instead "
            "(kubectl create token NAME --duration 8760h, as the user's `token:`)")
    if user.get("token"):
        return str(user["token"])
    if user.get("tokenFile"):
        try:
            return Path(_file(user["tokenFile"], base)).read_text().strip()
        except OSError as exc:
            raise KubeConfigError(f"context {context!r}: cannot read its tokenFile: "
                                  f"{exc.strerror}") from None
    return None


def in_cluster(env: Mapping[str, str], namespace: str | None = None,
               root: Path = SERVICE_ACCOUNT) -> KubeTarget:
    host, port = env["KUBERNETES_SERVICE_HOST"], env.get("KUBERNETES_SERVICE_PORT", "443")
    try:
        token = (root / "token").read_text().strip()
    except OSError:
        raise KubeConfigError(f"in a pod, but no service account token at {root}/token: "
                              "mount one (automountServiceAccountToken)") from None
    ns_file = root / "namespace"
    own = ns_file.read_text().strip() if ns_file.exists() else "default"
    ca = root / "ca.crt"
    host = f"[{host}]" if ":" in host else host
    return KubeTarget(server=f"https://{host}:{port}", context="in-cluster",
                      namespace=namespace or own, token=token,
                      verify=str(ca) if ca.exists() else True)
