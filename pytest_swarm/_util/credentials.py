"""The one place that hides credentials in a store's URL from reports, logs, errors and the terminal. Free of any
driver."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

_SECRET_KEYS = ("password", "sslpassword", "passfile", "sslkey")
"""libpq parameters (also accepted in a URL's query) whose values are secrets or point at them."""


def redact(location: str) -> str:
    """The location as it may be shown: a URL's password and secret query values replaced by `***`; a path as it is."""
    parts = urlsplit(location)
    if not parts.scheme or "://" not in location:
        return location
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    query = urlencode(
        [(k, "***" if k.lower() in _SECRET_KEYS else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)],
        safe="*",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(text: str, location: str) -> str:
    """`text` (a driver's error, say) with every secret of `location` cut out, raw or percent-decoded, then the location
    redacted."""
    parts = urlsplit(location)
    secrets = [parts.password] if parts.password else []
    secrets += [v for k, v in parse_qsl(parts.query) if k.lower() in _SECRET_KEYS and v]
    text = text.replace(location, redact(location))
    for secret in secrets:
        for form in {secret, unquote(secret)}:
            text = text.replace(form, "***")
    return text
