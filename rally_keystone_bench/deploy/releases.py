"""Older Keystone releases with the dependencies of their time.

OpenStack pins each release's libraries in its upper-constraints file, which
is not on PyPI. What PyPI does offer is the upload time of every file, and
pip (25.3 and later) can resolve with ``--uploaded-prior-to``: a release
installed with only what was published by the day it came out gets the
oslo libraries, SQLAlchemy and WebOb it was tested with, not today's.

``cutoff(spec)`` is that date for a pinned ``keystone==X``; None for any
other spec (the newest release, a range, a local checkout), which is
installed as before.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request

from rally_keystone_bench.errors import BenchError

# First upload of each release on PyPI (https://pypi.org/pypi/keystone/json,
# read 2026-11-25). A release not listed is looked up there once.
RELEASED = {
    "19.0.0": "2021-04-14T11:11:10Z",
    "20.0.0": "2021-10-06T11:20:06Z",
    "21.0.0": "2022-03-30T11:52:53Z",
    "22.0.0": "2022-10-05T12:12:47Z",
    "22.0.1": "2023-10-09T06:27:13Z",
    "22.0.2": "2024-04-04T09:34:21Z",
    "23.0.0": "2023-03-22T12:19:00Z",
    "23.0.1": "2023-10-09T06:29:58Z",
    "23.0.2": "2024-09-06T12:06:21Z",
    "24.0.0": "2023-10-04T11:11:02Z",
    "24.1.0": "2025-02-28T15:04:29Z",
    "25.0.0": "2024-04-03T11:52:42Z",
    "26.0.0": "2024-10-02T11:17:00Z",
    "26.1.0": "2026-01-26T13:48:41Z",
    "26.1.1": "2026-04-16T09:27:40Z",
    "27.0.0": "2025-04-02T10:50:23Z",
    "27.0.1": "2026-04-16T09:24:20Z",
    "27.0.2": "2026-07-02T09:49:23Z",
    "27.1.0": "2026-09-03T18:40:51Z",
    "28.0.0": "2025-10-01T10:51:11Z",
    "28.0.1": "2026-04-16T09:25:31Z",
    "28.0.2": "2026-07-02T09:53:03Z",
    "28.1.0": "2026-09-03T18:46:16Z",
    "29.0.0": "2026-04-01T10:48:30Z",
    "29.0.1": "2026-04-16T09:33:42Z",
    "29.0.2": "2026-07-02T09:54:43Z",
    "29.1.0": "2026-09-03T18:46:51Z",
    "30.0.0": "2026-09-30T10:45:10Z",
}

# The newest release: installed with today's dependencies, as it always was.
NEWEST = "30.0.0"

# What a release's upper-constraints capped and its publication date cannot:
# a library whose next major came out before the release, but which the
# release did not work with. Keyed by the release's major version.
CAPS = {
    # SQLAlchemy 2.0 (January 2023) removed sqlalchemy.databases, which
    # sqlalchemy-migrate (still imported by Keystone 23) needs; 2023.1's
    # upper-constraints held SQLAlchemy at 1.4.46.
    "23": ("SQLAlchemy<2",),
}


def caps(spec: str) -> tuple[str, ...]:
    """Constraints SPEC needs beyond its date (see CAPS)."""
    version = pinned_version(spec)
    return CAPS.get(version.split(".")[0], ()) if version else ()


# Build dependencies of old sdists (pbr imports pkg_resources, gone from setuptools 81).
BUILD_CONSTRAINTS = "setuptools<81\n"

# pip learnt --uploaded-prior-to in 25.3; Python 3.11's bundled pip is older.
PIP_WITH_CUTOFF = "pip>=25.3"

PYPI = "https://pypi.org/simple"


def pypi_only(environ: dict[str, str] | os._Environ) -> list[str]:
    """pip options that read PyPI alone: a local mirror or wheel directory has
    no upload times, so pip would take today's files from it whatever the date.

    ``--isolated`` drops pip's configuration files and PIP_* variables; the
    CA bundle they named (a proxy's) is passed on.
    """
    args = ["--isolated", "--index-url", PYPI]
    cert = environ.get("PIP_CERT") or environ.get("REQUESTS_CA_BUNDLE")
    if cert:
        args += ["--cert", cert]
    return args


_PINNED = re.compile(r"^\s*keystone\s*==\s*([0-9][0-9A-Za-z.]*)\s*$", re.IGNORECASE)


def pinned_version(spec: str) -> str | None:
    """X for a spec ``keystone==X``; None for anything else."""
    m = _PINNED.match(spec or "")
    return m.group(1) if m else None


def cutoff(spec: str, lookup: bool = True) -> str | None:
    """The upload time (ISO 8601, UTC) limiting SPEC's dependencies; None when unlimited.

    One minute after the release's own first upload, so the release itself
    is found. A release missing from the table is asked of PyPI (LOOKUP).
    """
    version = pinned_version(spec)
    if version is None or version == NEWEST:
        return None
    stamp = RELEASED.get(version)
    if stamp is None and lookup:
        stamp = _pypi_upload_time(version)
    if stamp is None:
        return None
    return _plus_one_minute(stamp)


def _plus_one_minute(stamp: str) -> str:
    from datetime import datetime, timedelta

    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ") + timedelta(minutes=1)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pypi_upload_time(version: str) -> str | None:
    url = f"https://pypi.org/pypi/keystone/{version}/json"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 (fixed https URL)
            files = json.load(resp).get("urls") or []
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # no such release: pip, asked for it plainly, says so itself
            return None
        raise BenchError(
            f"keystone=={version}: its release date could not be read from PyPI ({exc})"
        ) from None
    except Exception as exc:
        raise BenchError(
            f"keystone=={version}: its release date could not be read from PyPI ({exc})"
        ) from None
    stamps = [f.get("upload_time_iso_8601", "")[:19] + "Z" for f in files]
    return min(stamps) if stamps else None
