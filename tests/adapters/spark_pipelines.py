"""Pipelines the Spark tests run: in a module of their own, so Spark's executors import them
by name (the session fixture puts the repository on their path)."""

from __future__ import annotations

from typing import Any

import deltaflow as df
from deltaflow.graphs import Reachability as Reachability


class Degrees(df.Pipeline):
    """Out-degree of every node, and how many nodes have each degree: two reductions."""

    def build(self, edges: df.Collection) -> df.Collection:
        return edges.count().map(lambda nd: (nd[1], nd[0])).count()


class Totals(df.Pipeline):
    """Sum and maximum of the values per key: ``reduce`` with user logic."""

    def build(self, sales: df.Collection) -> df.Collection:
        return sales.reduce(lambda k, vs: [((sum(v * n for v, n in vs), max(v for v, _ in vs)), 1)])


class Orders(df.Pipeline):
    """Orders joined with customers by customer id: a join, its datum a nested tuple."""

    def build(self, orders: df.Collection, customers: df.Collection) -> df.Collection:
        by_customer = orders.map(lambda o: (o[1], (o[0], o[2])))
        return by_customer.join(customers)


class Split(df.Pipeline):
    """Two named outputs: words and their lengths' counts."""

    def build(self, words: df.Collection) -> dict[str, df.Collection]:
        return {"words": words.distinct(), "lengths": words.map(lambda w: (len(w), w)).count()}


class Fails(df.Pipeline):
    """A map whose function raises on one datum."""

    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(explode)


def explode(x: Any) -> Any:
    """Raise on 13, else return ``x``."""
    if x == 13:
        msg = "thirteen is unlucky"
        raise ValueError(msg)
    return x


class Identity(df.Pipeline):
    """Every update of ``xs`` as it is."""

    def build(self, xs: df.Collection) -> df.Collection:
        return xs


class WordCount(df.Pipeline):
    """``(word, n)``: how many times each word occurs in the lines."""

    def build(self, lines: df.Collection) -> df.Collection:
        return lines.flat_map(lambda line: line.split()).map(lambda w: (w, w)).count()


class TypedClicks(df.Pipeline):
    """A declared input: the datum is (user, n) whatever the DataFrame's column order."""

    schemas = {"clicks": "user string, n long"}

    def build(self, clicks: df.Collection) -> df.Collection:
        return clicks


class LatestByCategory(df.Pipeline):
    """Views ``(user, page, at)`` joined with a page table ``(page, category)`` and a table of
    users' tiers ``(user, tier)``: the latest view (a ``datetime``) per category and tier,
    and per category the views in each hour of the day (``at.hour``)."""

    def build(
        self, views: df.Collection, pages: df.Collection, tiers: df.Collection
    ) -> dict[str, df.Collection]:
        by_page = views.map(lambda v: (v[1], (v[0], v[2]))).join(pages)  # (page, ((u, at), c))
        by_user = by_page.map(lambda pv: (pv[1][0][0], (pv[1][1], pv[1][0][1]))).join(tiers)
        latest = by_user.map(lambda uv: ((uv[1][0][0], uv[1][1]), uv[1][0][1])).max()
        hours = by_page.map(lambda pv: ((pv[1][1], pv[1][0][1].hour), pv[0])).count()
        return {"latest": latest, "hours": hours}


class Pairs(df.Pipeline):
    """``(k, a)`` and ``(k, b)`` to ``(k, (a, b))``: both inputs required."""

    def build(self, left: df.Collection, right: df.Collection) -> df.Collection:
        return left.join(right)


class MaybeBots(df.Pipeline):
    """Clicks per page, minus the bots' when given (``bots`` is optional)."""

    def build(self, clicks: df.Collection, bots: df.Collection = df.optional()) -> df.Collection:
        return clicks.concat(bots.negate()).map(lambda p: (p, None)).count()
