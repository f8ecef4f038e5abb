"""Validates the Kubernetes manifests in a directory, offline.

    python tests/support/validate_manifests.py deploy/kubernetes [--spin-toml spin.toml]

Every YAML document under the directory is checked against a real schema:
Kubernetes' own objects against the OpenAPI schemas of each Kubernetes
version in KUBERNETES_VERSIONS (bundled by the `kubernetes-validate`
package, strict variants: unknown fields are errors, as `kubectl apply`
refuses them by default); custom resources against the openAPIV3Schema of
the CustomResourceDefinitions found in the directory (schemas/), read with
the API server's structural-schema rules (see `structural`). Then the
documents are checked against each other and against the Spin manifest:
Secret keys referenced exist, Services select their workloads, the
SpinApp's `sandbox_hosts` names exactly the sandbox StatefulSet's pods,
every variable the SpinApp sets is a variable of spin.toml, and the code
interpreter's hosts that share sessions do so safely (see
`check_shared_interpreter`).

Prints one line per document and per cross-check, then a summary; exits 0
when everything holds, 1 otherwise, 2 when it cannot run.
"""

import argparse
import base64
import fnmatch
import functools
import math
import pathlib
import re
import sys
import tomllib
import urllib.parse

import jsonschema
import yaml
from kubernetes_validate import utils as kv
from referencing import Registry, Resource

# kubernetes-validate reads and parses a schema file at every call; the
# documents of one run and its two Kubernetes versions share most of them.
kv.schema_contents = functools.cache(kv.schema_contents)

# The oldest Kubernetes the manifests target and the newest the package knows.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
DEFINITIONS = "https://kubernetes.io/api/_definitions.json"
OBJECT_META = DEFINITIONS + "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
CLUSTER_DOMAIN = "svc.cluster.local"
WORKLOADS = ("StatefulSet", "Deployment")
# S3's rules for a bucket's name: 3 to 63 lower-case letters, digits, dots
# and hyphens, starting and ending with a letter or digit.
S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# A graceful stop first lets the runs in progress finish: python-data's
# time ceiling, the longest a run may take.
LONGEST_RUN_SECONDS = 60
# Then it writes every live session's state to the object store, at no less
# than this conservative rate from inside a cluster (images are compressed).
HAND_OVER_MIB_PER_SECOND = 32
# `--session-memory-mb` when not given.
DEFAULT_SESSION_MEMORY_MB = 2048


def unusable(message):
    print(f"cannot validate: {message}", file=sys.stderr)
    sys.exit(2)


class Report:
    def __init__(self):
        self.valid = 0
        self.invalid = 0
        self.consistent = 0
        self.inconsistent = 0

    def document(self, where, problems, against):
        if problems:
            self.invalid += 1
            for problem in problems:
                print(f"INVALID {where}: {problem}")
        else:
            self.valid += 1
            print(f"valid {where} ({against})")

    def check(self, name, problems):
        if problems:
            self.inconsistent += 1
            for problem in problems:
                print(f"INCONSISTENT {name}: {problem}")
        else:
            self.consistent += 1
            print(f"consistent {name}")


class Document:
    def __init__(self, path, index, body, root):
        self.path = path
        self.body = body
        self.kind = body.get("kind", "?")
        self.name = (body.get("metadata") or {}).get("name")
        named = f"{self.kind}/{self.name}" if self.name else self.kind
        self.where = f"{path.relative_to(root)}#{index} {named}"
        self.namespace = (body.get("metadata") or {}).get("namespace")


# PyYAML's safe loader over libyaml, which its wheels ship: the same
# documents as `yaml.safe_load_all` in a tenth of the time, most of a run's.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(root):
    documents = []
    for path in sorted(root.rglob("*.y*ml")):
        bodies = [body for body in yaml.load_all(path.read_text(), Loader=SAFE_LOADER) if body is not None]
        for index, body in enumerate(bodies, 1):
            if not isinstance(body, dict):
                unusable(f"{path}: document {index} is not a mapping")
            documents.append(Document(path, index, body, root))
    return documents


def error_lines(errors):
    lines = []
    for error in sorted(errors, key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(map(str, error.absolute_path)) or "(document)"
        lines.append(f"{where}: {error.message}")
    return lines


def structural(node):
    """A CRD's structural schema as the JSON Schema the API server applies.

    Objects that declare properties accept no other field unless marked
    x-kubernetes-preserve-unknown-fields (the API server prunes such fields,
    and kubectl's default strict field validation refuses them);
    `nullable` admits null; x-kubernetes-int-or-string admits both; list
    types `set` and `map` require unique items and unique keys. CEL rules
    (x-kubernetes-validations) and embedded resources are not modelled
    here, so a schema that has any is refused rather than half-checked.
    """
    if isinstance(node, list):
        return [structural(item) for item in node]
    if not isinstance(node, dict):
        return node
    for unsupported in ("x-kubernetes-validations", "x-kubernetes-embedded-resource"):
        if node.get(unsupported):
            unusable(f"the CRD uses {unsupported}, which this validator does not check")
    out = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "$defs", "definitions"):
            out[key] = {name: structural(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            out[key] = structural(value)
        else:
            out[key] = value
    if node.get("nullable"):
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if node.get("x-kubernetes-int-or-string") and "type" not in node and "anyOf" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in node and "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    return out


def unique_map_keys(validator, keys, instance, schema):
    """x-kubernetes-list-type: map — no two items may share their keys."""
    if schema.get("x-kubernetes-list-type") != "map" or not validator.is_type(instance, "array"):
        return
    seen = set()
    for item in instance:
        if isinstance(item, dict):
            key = tuple(repr(item.get(k)) for k in keys)
            if key in seen:
                yield jsonschema.ValidationError(f"duplicate item with keys {dict(zip(keys, key))}")
            seen.add(key)


StructuralValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"x-kubernetes-list-map-keys": unique_map_keys}
)

FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("int32")
def int32(value):
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@FORMATS.checks("int64")
def int64(value):
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@functools.cache
def kubernetes_definitions(version):
    return kv.schema_contents(f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version)


def custom_resources(documents):
    """(apiVersion, kind) -> (schema, where it comes from) for every version a CRD serves."""
    found = {}
    for doc in documents:
        if doc.kind != "CustomResourceDefinition":
            continue
        spec = doc.body["spec"]
        for version in spec["versions"]:
            if not version.get("served", False):
                continue
            schema = structural(version["schema"]["openAPIV3Schema"])
            # The API server checks metadata itself, as ObjectMeta.
            schema.setdefault("properties", {})["metadata"] = {"$ref": OBJECT_META}
            api_version = f"{spec['group']}/{version['name']}"
            source = f"CRD {doc.name} {version['name']} from {doc.where.split('#')[0]}"
            found[(api_version, spec["names"]["kind"])] = (schema, source)
    return found


def validate_documents(documents, report):
    crds = custom_resources(documents)
    for doc in documents:
        if doc.kind == "Kustomization":
            continue  # not an API object: see `check_kustomization`
        key = (doc.body.get("apiVersion"), doc.kind)
        if key in crds:
            schema, source = crds[key]
            problems = []
            for version in KUBERNETES_VERSIONS:
                registry = Registry().with_resource(DEFINITIONS, Resource.from_contents(kubernetes_definitions(version)))
                validator = StructuralValidator(schema, registry=registry, format_checker=FORMATS)
                problems += [p for p in error_lines(validator.iter_errors(doc.body)) if p not in problems]
            report.document(doc.where, problems, source)
            continue
        problems = []
        for version in KUBERNETES_VERSIONS:
            try:
                kv.validate(doc.body, version, strict=True)
            except kv.ValidationError as error:
                where = ".".join(map(str, error.path)) or "(document)"
                problems.append(f"{where}: {error.message} (Kubernetes {error.version})")
            except kv.SchemaNotFoundError as error:
                problems.append(error.message)
        report.document(doc.where, problems, "Kubernetes " + ", ".join(kv.major_minor(v) for v in KUBERNETES_VERSIONS))


def walk(node):
    """Every mapping inside a document."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def secrets(documents):
    """(namespace, name) -> {key: value} of every Secret."""
    found = {}
    for doc in documents:
        if doc.kind == "Secret":
            values = dict(doc.body.get("stringData") or {})
            for key, encoded in (doc.body.get("data") or {}).items():
                values[key] = base64.b64decode(encoded).decode()
            found[(doc.namespace, doc.name)] = values
    return found


def one(documents, kind, name=None):
    matches = [d for d in documents if d.kind == kind and (name is None or d.name == name)]
    return matches[0] if len(matches) == 1 else None


def pod_spec(doc):
    return doc.body["spec"]["template"]["spec"]


def containers(doc):
    return pod_spec(doc).get("containers", [])


def in_namespace(documents, namespace):
    return [d for d in documents if d.namespace == namespace]


def selects(service, workload):
    """Whether the Service picks the workload's pods (no selector picks none)."""
    selector = service.body["spec"].get("selector") or {}
    labels = workload.body["spec"]["template"]["metadata"].get("labels", {})
    return bool(selector) and service.namespace == workload.namespace and selector.items() <= labels.items()


def container_ports(container):
    """The names and numbers a container's ports answer to."""
    ports = container.get("ports", [])
    return {p["name"] for p in ports if "name" in p} | {p["containerPort"] for p in ports}


def secret_ref(entry):
    """The secretKeyRef of an env entry or a SpinApp variable, if any."""
    return ((entry or {}).get("valueFrom") or {}).get("secretKeyRef")


def spin_variables(spinapp):
    return {v["name"]: v for v in spinapp.body["spec"].get("variables", [])}


def plain(variables, name, problems):
    entry = variables.get(name)
    if entry is None or "value" not in entry:
        problems.append(f"the SpinApp sets no plain value for {name}")
        return None
    return entry["value"]


def check_namespaces(documents):
    namespaces = [d for d in documents if d.kind == "Namespace"]
    if len(namespaces) != 1:
        return [f"expected one Namespace, found {len(namespaces)}"]
    expected = namespaces[0].name
    skip = {"Namespace", "CustomResourceDefinition", "Kustomization"}
    placed = [d for d in documents if d.kind not in skip]
    return [f"{d.where} is in namespace {d.namespace!r}, not {expected!r}" for d in placed if d.namespace != expected]


def check_secret_references(documents):
    known = secrets(documents)
    problems = []
    for doc in documents:
        if doc.kind == "CustomResourceDefinition":
            continue  # a schema: its secretKeyRef entries describe fields, not references
        for node in walk(doc.body):
            ref = node.get("secretKeyRef")
            if not isinstance(ref, dict):
                continue
            name, key = ref.get("name"), ref.get("key")
            values = known.get((doc.namespace, name))
            if values is None:
                problems.append(f"{doc.where} refers to Secret {name!r}, which is not defined")
            elif key not in values:
                problems.append(f"{doc.where} refers to key {key!r} of Secret {name!r}, which it lacks")
    return problems


def check_services(documents):
    """Every Service selects the pods of a workload that has its target ports,
    and every StatefulSet's serviceName is such a Service."""
    problems = []
    workloads = [d for d in documents if d.kind in WORKLOADS]
    for service in (d for d in documents if d.kind == "Service"):
        selected = [w for w in workloads if selects(service, w)]
        if not selected:
            problems.append(f"{service.where} selects no workload's pods")
        for workload in selected:
            declared = set().union(*map(container_ports, containers(workload)))
            for port in service.body["spec"].get("ports", []):
                target = port.get("targetPort", port.get("port"))
                if target not in declared:
                    problems.append(f"{service.where} targets port {target!r}, which {workload.where} does not declare")
    for workload in (d for d in documents if d.kind == "StatefulSet"):
        name = workload.body["spec"].get("serviceName")
        service = one(in_namespace(documents, workload.namespace), "Service", name)
        if service is None:
            problems.append(f"{workload.where} names serviceName {name!r}, which is not a Service of its namespace")
        elif not selects(service, workload):
            problems.append(f"{workload.where}'s serviceName {name!r} does not select its pods")
    return problems


def check_probes(documents):
    problems = []
    for workload in (d for d in documents if d.kind in WORKLOADS):
        for container in containers(workload):
            names = container_ports(container)
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                handler = container.get(probe) or {}
                for action in ("httpGet", "tcpSocket"):
                    port = (handler.get(action) or {}).get("port")
                    if port is not None and port not in names:
                        where = f"{workload.where} {container['name']} {probe}"
                        problems.append(f"{where} uses port {port!r}, which the container does not declare")
    return problems


def parse_host(entry):
    host, _, port = entry.rpartition(":")
    return host, int(port) if port.isdigit() else None


def service_port(service, port):
    return any(p.get("port") == port for p in service.body["spec"].get("ports", []))


def check_sandbox_hosts(documents, spinapp):
    """`sandbox_hosts` lists each pod of one StatefulSet by its stable DNS
    name, on a port its headless Service serves and its server listens on;
    `sandbox_allowed` admits every entry."""
    problems = []
    variables = spin_variables(spinapp)
    hosts = plain(variables, "sandbox_hosts", problems)
    allowed = plain(variables, "sandbox_allowed", problems)
    if hosts is None or allowed is None:
        return problems
    entries = [e.strip() for e in hosts.split(",") if e.strip()]
    ordinals = {}
    for entry in entries:
        host, port = parse_host(entry)
        labels = host.split(".")
        if len(labels) < 4 or ".".join(labels[3:]) != CLUSTER_DOMAIN or port is None:
            problems.append(f"sandbox_hosts entry {entry!r} is not <pod>.<service>.<namespace>.{CLUSTER_DOMAIN}:<port>")
            continue
        pod, service_name, namespace = labels[:3]
        workload_name, _, ordinal = pod.rpartition("-")
        ordinals.setdefault((workload_name, service_name, namespace, port), set()).add(ordinal)
        if not fnmatch.fnmatchcase(entry, allowed) or not allowed.startswith("*."):
            problems.append(f"sandbox_allowed {allowed!r} does not admit sandbox_hosts entry {entry!r}")
    if len(ordinals) != 1:
        groups = sorted(ordinals)
        return problems + [f"sandbox_hosts should name the pods of one StatefulSet on one port, found {groups}"]
    (workload_name, service_name, namespace, port), found = next(iter(ordinals.items()))
    scoped = in_namespace(documents, namespace)
    workload = one(scoped, "StatefulSet", workload_name)
    if workload is None:
        return problems + [f"sandbox_hosts names pods of StatefulSet {namespace}/{workload_name}, which is not defined"]
    replicas = workload.body["spec"].get("replicas", 1)
    if found != {str(i) for i in range(replicas)} or len(entries) != replicas:
        named = f"{len(entries)} pods of {workload.where} (ordinals {sorted(found)})"
        problems.append(f"sandbox_hosts names {named}, which has {replicas} replicas")
    governing = workload.body["spec"].get("serviceName")
    if governing != service_name:
        problems.append(f"sandbox_hosts uses service {service_name!r}, but {workload.where} has serviceName {governing!r}")
    service = one(scoped, "Service", service_name)
    if service is None:
        return problems + [f"sandbox_hosts uses Service {namespace}/{service_name}, which is not defined"]
    if service.body["spec"].get("clusterIP") != "None":
        problems.append(f"{service.where} is not headless (clusterIP: None), so its pods have no DNS names")
    if not service_port(service, port):
        problems.append(f"{service.where} does not serve port {port}")
    args = [a for c in containers(workload) for a in c.get("args", [])]
    listens = [a.removeprefix("--listen=") for a in args if a.startswith("--listen=")]
    if listens != [f"0.0.0.0:{port}"]:
        problems.append(f"{workload.where} should listen on 0.0.0.0:{port} (--listen=), found {listens}")
    return problems


def check_redis(documents, spinapp):
    """`redis_allowed`, the store's allowed_outbound_hosts entry, is
    `redis://` and a Service's name and port; `redis_url` (from its Secret)
    points there with the password Redis requires."""
    problems = []
    variables = spin_variables(spinapp)
    redis_allowed = plain(variables, "redis_allowed", problems)
    if redis_allowed is None:
        return problems
    if not redis_allowed.startswith("redis://"):
        return problems + [f"redis_allowed {redis_allowed!r} is not a redis:// allowed_outbound_hosts entry"]
    redis_host = redis_allowed.removeprefix("redis://")
    host, port = parse_host(redis_host)
    labels = host.split(".")
    if len(labels) != 5 or ".".join(labels[2:]) != CLUSTER_DOMAIN:
        return problems + [f"redis_allowed {redis_allowed!r} is not redis://<service>.<namespace>.{CLUSTER_DOMAIN}:<port>"]
    service = one(in_namespace(documents, labels[1]), "Service", labels[0])
    if service is None or not service_port(service, port):
        return problems + [f"redis_allowed {redis_allowed!r} is not a port of a Service defined here"]
    ref = secret_ref(variables.get("redis_url"))
    if not ref:
        return problems + ["redis_url should come from a Secret: it carries the password"]
    known = secrets(documents)
    url = known.get((spinapp.namespace, ref["name"]), {}).get(ref["key"])
    if url is None:
        return problems  # reported by the Secret references check
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "redis" or f"{parsed.hostname}:{parsed.port}" != redis_host:
        problems.append(f"redis_url in Secret {ref['name']!r} does not point at the host and port of redis_allowed {redis_allowed!r}")
    for server in (d for d in documents if d.kind in WORKLOADS and selects(service, d)):
        for container in containers(server):
            if "--requirepass" not in container.get("args", []):
                problems.append(f"{server.where} sets no --requirepass")
                continue
            password = required_password(server, container, known)
            if password is None or urllib.parse.unquote(parsed.password or "") != password:
                problems.append(f"redis_url's password is not the one {server.where} requires")
    return problems


def required_password(server, container, known):
    """The password a Redis container's `--requirepass $(VARIABLE)` takes
    from a Secret, if it does."""
    args = container.get("args", [])
    if "--requirepass" not in args or args.index("--requirepass") + 1 >= len(args):
        return None
    env = {e["name"]: e for e in container.get("env", [])}
    variable = args[args.index("--requirepass") + 1].removeprefix("$(").removesuffix(")")
    password_ref = secret_ref(env.get(variable)) or {}
    return known.get((server.namespace, password_ref.get("name")), {}).get(password_ref.get("key"))


def check_sandbox_token(documents, spinapp):
    """The app presents the very token the sandbox hosts expect."""
    app = secret_ref(spin_variables(spinapp).get("sandbox_token"))
    hosts = [
        (workload.where, secret_ref(env))
        for workload in documents
        if workload.kind in WORKLOADS
        for container in containers(workload)
        for env in container.get("env", [])
        if env["name"] == "ANYPATH_SANDBOX_TOKEN"
    ]
    if not app or not hosts:
        return ["sandbox_token and the hosts' ANYPATH_SANDBOX_TOKEN should both come from a Secret"]
    return [f"{where} reads its token from {ref}, the app from {app}" for where, ref in hosts if ref != app]


def flag(args, name):
    """The value of `--name=VALUE` or `--name VALUE` among a container's args."""
    for index, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and index + 1 < len(args):
            return args[index + 1]
    return None


def setting(container, variable, name):
    """How a container sets one of the server's settings, by its flag (which
    wins, as clap reads it) or its environment variable: ("value", text),
    ("secret", secretKeyRef), ("other", None) for another source, or None.
    `name` is None for a setting that has no flag."""
    given = flag(container.get("args", []), name) if name else None
    if given is not None:
        return ("value", given)
    entry = {e["name"]: e for e in container.get("env", [])}.get(variable)
    if entry is None:
        return None
    if secret_ref(entry):
        return ("secret", secret_ref(entry))
    if "value" in entry:
        return ("value", entry["value"])
    return ("other", None)


def resolved(workload, found, known):
    """A setting's text: its plain value, or its value in the Secret (None
    when the Secret or key is missing: the Secret references check says so)."""
    source, value = found or (None, None)
    if source == "value":
        return value
    if source == "secret":
        return known.get((workload.namespace, value.get("name")), {}).get(value.get("key"))
    return None


def session_store_problems(where, url):
    """`s3://BUCKET[/PREFIX]`, as the server parses it, with a bucket S3 accepts."""
    parsed = urllib.parse.urlsplit(url)
    segments = parsed.path.split("/")[1:] if parsed.path else []
    if (
        parsed.scheme != "s3"
        or not S3_BUCKET.fullmatch(parsed.netloc)
        or parsed.query
        or parsed.fragment
        or any(segment == "" for segment in segments)
    ):
        return [f"{where}: the session store {url!r} is not an s3://bucket[/prefix] URL"]
    return []


def runs_redis(container):
    """Whether a container is a Redis server: its image is `redis`, or it starts `redis-server`."""
    repository = container.get("image", "").rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    return repository == "redis" or (container.get("args") or [None])[0] == "redis-server"


def coordination_problems(where, workload, container, documents, known, spinapp):
    """The coordination URL comes from a Secret (it carries Redis's
    password) and names a Redis Service defined here, on a port it serves,
    with the password its server requires; on the Redis the app keeps tenant
    data in, it uses another database."""
    found = setting(container, "ANYPATH_COORDINATION", "--coordination")
    if not found or found[0] != "secret":
        return [f"{where}: the coordination URL should come from a Secret: it carries Redis's password"]
    url = resolved(workload, found, known)
    if url is None:
        return []  # reported by the Secret references check
    parsed = urllib.parse.urlsplit(url)
    try:
        port = parsed.port
    except ValueError:
        port = None
    labels = (parsed.hostname or "").split(".")
    shown = f"{parsed.scheme}://{parsed.hostname}:{port}{parsed.path}"  # without the password
    service = None
    if parsed.scheme == "redis" and len(labels) == 5 and ".".join(labels[2:]) == CLUSTER_DOMAIN:
        service = one(in_namespace(documents, labels[1]), "Service", labels[0])
    servers = [d for d in documents if d.kind in WORKLOADS and service is not None and selects(service, d)]
    redis = [(s, c) for s in servers for c in containers(s) if runs_redis(c)]
    if service is None or not service_port(service, port) or not redis:
        return [f"{where}: the coordination URL {shown!r} does not name a Redis Service defined here and one of its ports"]
    problems = []
    for server, redis_container in redis:
        password = required_password(server, redis_container, known)
        if password is not None and urllib.parse.unquote(parsed.password or "") != password:
            problems.append(f"{where}: the coordination URL's password is not the one {server.where} requires")
    database = parsed.path.strip("/") or "0"
    app_ref = secret_ref(spin_variables(spinapp).get("redis_url")) if spinapp else None
    app_url = known.get((spinapp.namespace, app_ref["name"]), {}).get(app_ref["key"]) if app_ref else None
    if app_url is not None:
        app = urllib.parse.urlsplit(app_url)
        same_server = (app.hostname, app.port) == (parsed.hostname, port)
        if same_server and (app.path.strip("/") or "0") == database:
            problems.append(
                f"{where}: the coordination URL uses database {database} of {parsed.hostname}:{port}, "
                "the one the app's redis_url keeps tenant data in"
            )
    return problems


# Settings that are credentials: each must come from a Secret, never a plain value.
CREDENTIALS = (
    ("AWS_ACCESS_KEY_ID", None),
    ("AWS_SECRET_ACCESS_KEY", None),
    ("ANYPATH_SIGNING_KEY", "--signing-key"),
    ("ANYPATH_SANDBOX_TOKEN", "--token"),
)


def credential_problems(where, container):
    problems = []
    for variable, name in CREDENTIALS:
        found = setting(container, variable, name)
        if found is None:
            problems.append(f"{where}: sets no {variable}; it should come from a Secret")
        elif found[0] != "secret":
            problems.append(f"{where}: should take {variable} from a Secret, not a plain value")
    return problems


def front_problems(workload, container, documents):
    """A Service selects the hosts, only them, with no session affinity (any
    host serves any session), on the port they listen on at 0.0.0.0."""
    services = [d for d in documents if d.kind == "Service" and selects(d, workload)]
    if not services:
        return [f"no Service selects {workload.where}"]
    problems = []
    workloads = [d for d in documents if d.kind in WORKLOADS and d is not workload]
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    listens = [a.removeprefix("--listen=") for a in container.get("args", []) if a.startswith("--listen=")]
    for service in services:
        affinity = service.body["spec"].get("sessionAffinity", "None")
        if affinity != "None":
            problems.append(f"{service.where} sets sessionAffinity {affinity!r}: every host serves every session, so none is needed")
        for other in (w for w in workloads if selects(service, w)):
            problems.append(f"{service.where} selects the pods of {other.where} too, not only {workload.where}'s")
        for port in service.body["spec"].get("ports", []):
            target = port.get("targetPort", port.get("port"))
            number = ports.get(target, target)
            if listens != [f"0.0.0.0:{number}"]:
                problems.append(f"{workload.where} should listen on 0.0.0.0:{number} (--listen=), found {listens}")
    return problems


def grace_problems(workload, container):
    """A graceful stop hands every live session over: the pod's grace
    period covers its preStop pause, the longest run finishing, and its
    live sessions' state (`--session-memory-mb`) written at
    HAND_OVER_MIB_PER_SECOND."""
    spec = pod_spec(workload)
    grace = spec.get("terminationGracePeriodSeconds", 30)
    pause = ((((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}).get("seconds", 0))
    memory = flag(container.get("args", []), "--session-memory-mb")
    memory_mb = int(memory) if memory and memory.isdigit() else DEFAULT_SESSION_MEMORY_MB
    writing = math.ceil(memory_mb / HAND_OVER_MIB_PER_SECOND)
    needed = pause + LONGEST_RUN_SECONDS + writing
    if grace < needed:
        return [
            f"{workload.where}'s terminationGracePeriodSeconds {grace} is shorter than the {needed} s a graceful stop may take "
            f"({pause} s preStop, {LONGEST_RUN_SECONDS} s for a run to finish, {memory_mb} MiB of live sessions "
            f"at {HAND_OVER_MIB_PER_SECOND} MiB/s)"
        ]
    return []


def check_shared_interpreter(documents, spinapp):
    """The code-interpreter hosts that share sessions (`--session-store`
    and `--coordination`, or their variables): both are set, the store is an
    `s3://bucket[/prefix]` URL, the coordination a Redis defined here (see
    `coordination_problems`); the object store's credentials, the signing
    key and the token come from a Secret, and hosts sharing one store share
    one signing key; at least 2 replicas, so that a session outlives a
    pod; a Service in front with no session affinity, selecting only them;
    a grace period long enough to hand every session over (`grace_problems`)."""
    known = secrets(documents)
    sharing = [
        (workload, container)
        for workload in documents
        if workload.kind in WORKLOADS
        for container in containers(workload)
        if setting(container, "ANYPATH_SESSION_STORE", "--session-store")
        or setting(container, "ANYPATH_COORDINATION", "--coordination")
    ]
    if not sharing:
        return ["no workload shares code-interpreter sessions (ANYPATH_SESSION_STORE and ANYPATH_COORDINATION)"]
    problems = []
    signing_keys = {}
    for workload, container in sharing:
        where = f"{workload.where} container {container['name']}"
        store = setting(container, "ANYPATH_SESSION_STORE", "--session-store")
        if store is None:
            problems.append(f"{where}: sets a coordination URL but no session store")
        else:
            url = resolved(workload, store, known)
            problems += session_store_problems(where, url) if url is not None else []
            signing = setting(container, "ANYPATH_SIGNING_KEY", "--signing-key")
            signing_keys.setdefault(url, set()).add(repr(signing))
        problems += coordination_problems(where, workload, container, documents, known, spinapp)
        problems += credential_problems(where, container)
        replicas = workload.body["spec"].get("replicas", 1)
        if replicas < 2:
            problems.append(f"{workload.where} has {replicas} replica(s): a session outlives a pod only when another takes it over (at least 2)")
        problems += front_problems(workload, container, documents)
        problems += grace_problems(workload, container)
    for url, keys in signing_keys.items():
        if len(keys) > 1:
            problems.append(f"the hosts sharing session store {url!r} read different signing keys: a link made on one fails on another")
    return problems


def check_spin_variables(spinapp, spin_toml):
    """Each variable the SpinApp sets is one of spin.toml's, set once; each it
    must set (no default) is set; each spin.toml marks secret comes from a Secret."""
    try:
        declared = tomllib.loads(spin_toml.read_text()).get("variables", {})
    except (OSError, tomllib.TOMLDecodeError) as error:
        unusable(f"reading {spin_toml}: {error}")
    variables = spin_variables(spinapp)
    names = [v["name"] for v in spinapp.body["spec"].get("variables", [])]
    problems = [f"the SpinApp sets {name} more than once" for name in sorted(set(names)) if names.count(name) > 1]
    problems += [f"the SpinApp sets {name}, which spin.toml's [variables] does not declare"
                 for name in variables if name not in declared]
    for name, spec in declared.items():
        if (spec.get("required") or "default" not in spec) and name not in variables:
            problems.append(f"spin.toml's {name} has no default and the SpinApp does not set it")
        if spec.get("secret") and name in variables and not secret_ref(variables[name]):
            problems.append(f"spin.toml marks {name} secret, but the SpinApp does not take it from a Secret")
    return problems


def check_kustomization(root, documents, kustomization):
    """The kustomization applies every manifest here but the Secret example
    and the vendored schemas, into the Namespace defined here. Kustomize
    publishes no schema for it, so these are the checks it gets."""
    body = kustomization.body
    problems = []
    if body.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or body.get("kind") != "Kustomization":
        problems.append("kustomization.yaml is not a kustomize.config.k8s.io/v1beta1 Kustomization")
    listed = body.get("resources") or []
    here = {d.path.name for d in documents if d.path.parent == root}
    expected = sorted(here - {"kustomization.yaml", "secret.example.yaml"})
    if sorted(listed) != expected:
        problems.append(f"kustomization.yaml lists {sorted(listed)}, the manifests here are {expected}")
    namespace = one(documents, "Namespace")
    if namespace is None or body.get("namespace") != namespace.name:
        problems.append("kustomization.yaml's namespace is not the Namespace defined here")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=pathlib.Path)
    repository = pathlib.Path(__file__).resolve().parents[2]
    parser.add_argument("--spin-toml", type=pathlib.Path, default=repository / "spin.toml")
    args = parser.parse_args()
    root = args.directory.resolve()
    documents = load(root)
    if not documents:
        unusable(f"no YAML documents under {root}")
    report = Report()
    validate_documents(documents, report)
    kustomization = next((d for d in documents if d.path == root / "kustomization.yaml"), None)
    if kustomization is None:
        report.check("kustomization", ["kustomization.yaml is missing"])
    else:
        problems = check_kustomization(root, documents, kustomization)
        report.document(kustomization.where, problems, "its resources and namespace, against this directory")
    report.check("namespaces", check_namespaces(documents))
    report.check("Secret references", check_secret_references(documents))
    report.check("Services and workloads", check_services(documents))
    report.check("probe ports", check_probes(documents))
    spinapp = one(documents, "SpinApp")
    if spinapp is None:
        report.check("SpinApp", ["expected exactly one SpinApp"])
    else:
        report.check("sandbox hosts", check_sandbox_hosts(documents, spinapp))
        report.check("Redis", check_redis(documents, spinapp))
        report.check("sandbox token", check_sandbox_token(documents, spinapp))
        report.check(f"Spin variables against {args.spin_toml.name}", check_spin_variables(spinapp, args.spin_toml))
    report.check("shared interpreter", check_shared_interpreter(documents, spinapp))
    print(
        f"summary: {report.valid} documents valid, {report.invalid} invalid; "
        f"{report.consistent} cross-checks consistent, {report.inconsistent} inconsistent"
    )
    return 1 if report.invalid or report.inconsistent else 0


if __name__ == "__main__":
    sys.exit(main())
