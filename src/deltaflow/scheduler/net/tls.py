"""TLS for a job's connections across a network you do not trust.

Every connection between a job's processes is authenticated with the job's secret
(:mod:`deltaflow.scheduler.net.handshake`) whether or not it is encrypted. On one machine
(``processes=``, Spark in local mode) that is all it needs: only the machine's own
administrator can see or alter loopback traffic. Between hosts, pass ``tls=TLS(...)`` to the
Spark adapter (or to :func:`~deltaflow.scheduler.net.peer.open_peer`): each connection then runs
TLS first, both ends presenting a certificate the other checks against ``ca``, and the
secret's exchange runs inside it.

    >>> tls = TLS("peer.pem", key="peer.key")
    >>> tls.ca is None, "peer.key" in repr(tls)
    (True, True)

The files are read where each peer starts (a Spark executor, the driver): deploy them there
(a cluster's secret store, a mounted volume), or use one self-signed certificate for every
peer (``ca`` then defaults to ``cert``). Host names are not checked: peers are addressed by
IP, and a peer is known by its certificate's chain to ``ca`` and by the job's secret. To set
anything else (ciphers, a hardware key), subclass :class:`TLS` and override
:meth:`TLS.context`.
"""

from __future__ import annotations

import ssl

import attrs

__all__ = ["TLS"]


@attrs.frozen
class TLS:
    """Certificates for TLS on every connection of a job (see the module).

    Args:
        cert: the PEM file of the certificate (chain) this process presents; it may hold the
            private key too.
        key: the PEM file of the private key, when ``cert`` does not hold it.
        ca: the PEM file of the certificates a peer's certificate must chain to; ``cert``
            itself when omitted (one self-signed certificate shared by every peer).
    """

    cert: str = attrs.field(converter=str)
    key: str | None = attrs.field(default=None, converter=attrs.converters.optional(str))
    ca: str | None = attrs.field(default=None, converter=attrs.converters.optional(str))

    def context(self, *, server: bool) -> ssl.SSLContext:
        """The context for the accepting (``server``) or the dialing end of a connection:
        TLS 1.2 or later, this process's certificate, and the peer's certificate required
        and checked against ``ca``.

        Raises:
            ValueError: a file is missing or holds no usable certificate or key, naming it.
        """
        purpose = ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT
        ctx = ssl.SSLContext(purpose)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if not server:
            ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_REQUIRED
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            files = self.cert if self.key is None else f"{self.cert} and {self.key}"
            msg = f"TLS: cannot load the certificate and key from {files}: {exc}"
            raise ValueError(msg) from exc
        ca = self.cert if self.ca is None else self.ca
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            msg = f"TLS: cannot load the CA certificates from {ca}: {exc}"
            raise ValueError(msg) from exc
        return ctx
