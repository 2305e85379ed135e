"""CSRF tokens for the viewer's edit forms: signed by a secret of the process, checked on POST.

Starlette has no CSRF protection of its own. The viewer has no sessions or
cookies, so a token is not tied to a session but to the server process and
to the form's action: ``issued.nonce.signature``, where the signature is an
HMAC-SHA256 under a random secret made when the app starts, over the action
path, the issue time and the nonce. A page of another site cannot read a
token (the same-origin policy, and the trusted-hosts check against DNS
rebinding), so it cannot forge a POST; a token of one form is refused by
another (a fork's cannot delete a thread); a token expires after
:data:`MAX_AGE` seconds and with the process. A token that confirms a change
is spent by it (``once=True``): sending the same confirmation twice (a
double click, the browser's back button) changes the store once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable

__all__ = ["MAX_AGE", "CsrfSigner"]

#: Seconds a token stays valid (a form left open over a night must be reloaded).
MAX_AGE = 12 * 3600


class CsrfSigner:
    """Issues and checks the tokens of one app (one secret per instance)."""

    def __init__(
        self, secret: bytes | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self._clock = clock
        self._lock = threading.Lock()
        self._spent: dict[str, int] = {}  # nonce -> issue time, until it expires anyway

    def _now(self) -> int:
        return int(self._clock())

    def _sign(self, action: str, issued: str, nonce: str) -> str:
        msg = f"{action}\n{issued}\n{nonce}".encode("utf-8", "surrogatepass")
        return hmac.new(self._secret, msg, hashlib.sha256).hexdigest()

    def token(self, action: str) -> str:
        """A token for a form posting to the path ``action``."""
        issued, nonce = str(self._now()), secrets.token_hex(8)
        return f"{issued}.{nonce}.{self._sign(action, issued, nonce)}"

    def check(self, action: str, token: str | None, *, once: bool = False) -> bool:
        """Whether ``token`` was issued by this signer for ``action`` and has not expired.

        Args:
            once: spend the token: it is refused from now on.
        """
        if not token:
            return False
        parts = token.split(".")
        if len(parts) != 3 or not parts[0].isdigit():
            return False
        issued, nonce, signature = parts
        if not hmac.compare_digest(signature, self._sign(action, issued, nonce)):
            return False
        now = self._now()
        if not 0 <= now - int(issued) <= MAX_AGE:
            return False
        with self._lock:
            if nonce in self._spent:
                return False
            if once:
                self._spent = {n: t for n, t in self._spent.items() if now - t <= MAX_AGE}
                self._spent[nonce] = int(issued)
        return True
