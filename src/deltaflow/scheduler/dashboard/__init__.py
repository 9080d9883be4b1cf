"""A job's live dashboard: ``df.open(..., dashboard=PORT)`` serves a page from the job's own
trio loop showing its graph with records per second on each edge, each output's frontier and
lag, arrangement sizes and memory per worker and process, every counter of
``job.statistics()`` and the checkpoint history, updating as the job runs
(:mod:`.server` for HTTP and who may read it, :mod:`.views` for what it shows).

    >>> import deltaflow as df, trio, urllib.request, json
    >>> class Same(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs
    >>> async def main():
    ...     async with df.open(Same(), dashboard=0) as job:
    ...         url = job.dashboard_url + "api/stats"
    ...         body = await trio.to_thread.run_sync(lambda: urllib.request.urlopen(url).read())
    ...         return json.loads(body)["pipeline"]
    >>> trio.run(main)
    'Same'
"""

from __future__ import annotations

from .server import Dashboard as Dashboard, check_dashboard as check_dashboard

__all__ = ["Dashboard", "check_dashboard"]
