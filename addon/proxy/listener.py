"""TLS for the clients of the reverse listeners, through mitmproxy's own `certs` option.

In reverse mode mitmproxy answers a client that opens with a TLS ClientHello with TLS,
presenting the certificate its `certs` option names for the host ("*": any), and a client that
speaks plain HTTP in plain HTTP on the same port. With `tooltap_tls_cert` (and
`tooltap_tls_key` when the key is a file of its own, as a Kubernetes TLS Secret mounts it),
the certificate and key are checked here, given to `certs`, and a plain-HTTP request is refused
with a 400 before anything is sent upstream (as nginx refuses plain HTTP on an HTTPS port):
a client that sends its API key in cleartext to a TLS listener hears so at once.

mitmproxy reads a certificate when it starts: after renewing one (cert-manager does), restart.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from mitmproxy import ctx, exceptions, http
from mitmproxy.proxy.mode_specs import ProxyMode, ReverseMode

REFUSED = "tooltap_refused"  # flow metadata: refused here, not traffic to inspect
CLEARTEXT = (
    b"tooltap: this listener speaks HTTPS only (tooltap_tls_cert is set). "
    b"Use an https:// base URL; this request was not sent upstream.\n"
)
COMBINED = "tooltap-listener.pem"  # in mitmproxy's confdir, mode 0600, when the key is apart


def listener_pem(cert_path: str, key_path: str) -> bytes | None:
    """The certificate chain and its key as one PEM for mitmproxy's `certs`, or None when the
    certificate file holds its key already (mitmproxy reads it as it is). Raises ValueError
    with what is wrong: a file that cannot be read, no certificate, no key, a key that is not
    the certificate's, or a CA certificate where a server's belongs."""
    cert_text = _read(cert_path, "tooltap_tls_cert")
    try:
        chain = x509.load_pem_x509_certificates(cert_text)
    except ValueError as exc:
        raise ValueError(f"tooltap_tls_cert: {cert_path} holds no PEM certificate") from exc
    key_text = _read(key_path, "tooltap_tls_key") if key_path else cert_text
    try:
        key = serialization.load_pem_private_key(key_text, password=None)
    except (ValueError, TypeError) as exc:
        where = f"tooltap_tls_key: {key_path}" if key_path else f"tooltap_tls_cert: {cert_path}"
        raise ValueError(
            f"{where} holds no unencrypted PEM private key"
            + ("" if key_path else " (give the key with tooltap_tls_key)")
        ) from exc
    leaf = chain[0]
    if leaf.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ):
        raise ValueError("tooltap_tls_key is not the key of tooltap_tls_cert's first certificate")
    try:
        is_ca = leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if is_ca:
        raise ValueError(
            "tooltap_tls_cert's first certificate is a CA: give the server's certificate first"
        )
    if not key_path:
        return None
    return cert_text.rstrip(b"\n") + b"\n" + key_text


def _read(path: str, option: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ValueError(f"{option}: cannot read {path}: {exc.strerror or exc}") from exc


def _private_file(folder: Path, name: str, content: bytes) -> Path:
    """content written to folder/name, readable by this user only (as mitmproxy's CA key)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / name
    partial = folder / f".{name}.partial"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    partial.replace(path)
    return path


class ListenerTLS:
    """Certificate checks, mitmproxy's `certs`, and the refusal of plain HTTP: a sub-addon of the
    tooltap addon, whose options it reads."""

    name = "tooltap-tls"

    def __init__(self) -> None:
        self.spec: str | None = None  # the `certs` entry given to mitmproxy

    def configure(self, updated: set[str]) -> None:
        if not {"tooltap_tls_cert", "tooltap_tls_key", "confdir", "mode"} & updated:
            return
        cert, key = ctx.options.tooltap_tls_cert, ctx.options.tooltap_tls_key
        others = [spec for spec in ctx.options.certs if spec != self.spec]
        if not cert:
            if key:
                raise exceptions.OptionsError("tooltap_tls_key needs tooltap_tls_cert")
            self._use(others, None)
            return
        regular = [m for m in ctx.options.mode if not isinstance(ProxyMode.parse(m), ReverseMode)]
        if regular:
            raise exceptions.OptionsError(
                "tooltap_tls_cert is for reverse mode: in regular mode mitmproxy makes each "
                f"host's certificate from its own CA (mode {regular[0]})"
            )
        try:
            combined = listener_pem(cert, key)
        except ValueError as exc:
            raise exceptions.OptionsError(str(exc)) from exc
        if combined is not None:
            confdir = Path(ctx.options.confdir).expanduser()
            path = str(_private_file(confdir, COMBINED, combined))
        else:
            path = str(Path(cert).expanduser())
        self._use(others, f"*={path}")

    def _use(self, others: list[str], spec: str | None) -> None:
        wanted = [*others, spec] if spec is not None else others
        self.spec = spec
        if list(ctx.options.certs) != wanted:
            ctx.options.update(certs=wanted)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if self.spec is None or flow.client_conn.tls_established:
            return
        if not isinstance(flow.client_conn.proxy_mode, ReverseMode):
            return
        flow.metadata[REFUSED] = "cleartext"
        flow.response = http.Response.make(
            400, CLEARTEXT, {"content-type": "text/plain; charset=utf-8", "connection": "close"}
        )
