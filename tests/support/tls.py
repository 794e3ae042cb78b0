"""TLS for the regular-mode tests: an upstream certificate, and a proxy that trusts it."""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import trustme

from tooltap.addon.harness.launch import Proxy


def upstream_tls(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA written to folder, and a server context for 127.0.0.1 that it signed."""
    ca = trustme.CA()
    path = folder / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return path, context


@contextlib.contextmanager
def regular_proxy(
    upstream_ca: Path, extra: tuple[str, ...] = ()
) -> Iterator[tuple[Proxy, ssl.SSLContext]]:
    """`tooltap run --regular` inspecting 127.0.0.1 and trusting the upstream's CA; with a
    client context that trusts mitmproxy's CA. extra: more of mitmdump's arguments."""
    extra = (
        "--set",
        f"ssl_verify_upstream_trusted_ca={upstream_ca}",
        "--set",
        "tooltap_hosts=127.0.0.1",
        *extra,
    )
    with Proxy.tooltap([], "--regular", "--log-format", "json", extra=extra) as proxy:
        trust = ssl.create_default_context(
            cafile=os.path.join(proxy.confdir, "mitmproxy-ca-cert.pem")
        )
        yield proxy, trust
