"""The time domain of a scope, chosen once before anything runs: int, pair or general.

Every time of one scope has one shape, fixed by the scope's depth (how many loops it sits
in): the top scope's times are ``int``, one loop's are ``Product(int, int)``, deeper loops'
nest products in the outer coordinate. So the shape is known at plan time and never has to
be rediscovered record by record: a scope's :class:`TimeDomain` (:func:`domain_for_depth`,
``Scope.domain``) is handed to the operators and traces of the scope, and they take from it

* the lattice: :meth:`~TimeDomain.less_equal`, :meth:`~TimeDomain.join`,
  :meth:`~TimeDomain.meet`, :meth:`~TimeDomain.advance_by` (and :meth:`~TimeDomain.advancer`,
  one frontier for many times), each written for the shape with no type test;
* the codec: how the domain's times are stored as columns (:attr:`~TimeDomain.columns`
  int64 columns per time, :meth:`~TimeDomain.to_columns` / :meth:`~TimeDomain.from_columns`),
  as a :class:`~deltaflow.operators.base.RunsBatch`'s run times or a trace batch's times;
* which kernels apply (:attr:`~TimeDomain.kernels`: numpy kernels need int64 time columns)
  and when (:meth:`~TimeDomain.count_kernel`, :meth:`~TimeDomain.join_kernel`: each
  kernel's own threshold, under the ``DELTAFLOW_KERNELS`` mode).

This is differential dataflow's ``T: Timestamp (+ TotalOrder)`` chosen once per scope, as
``reduce/paths.path_for`` chooses a reduction's path once. The general domain keeps the
generic lattice of :mod:`deltaflow.framework.lattice` (which walks a time's structure), and
every domain agrees with it on its own times (the tests check each against it).

    >>> d = domain_for_depth(1)
    >>> d.name, d.least, d.join(Product(3, 7), Product(4, 6))
    ('pair', Product(outer=0, inner=0), Product(outer=4, inner=7))
    >>> domain_for_depth(0).advancer([5])(3), domain_for_depth(2).columns is None
    (5, True)
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from typing import Any, ClassVar

import numpy as np

from . import lattice, tuning
from .kernels import use_kernel
from .lattice import Product, Time, new_tuple

__all__ = [
    "GeneralDomain",
    "IntDomain",
    "PairDomain",
    "TimeDomain",
    "domain_for_depth",
    "domain_of",
]


class TimeDomain:
    """The lattice, codec and kernels of one shape of times (see the module docstring).

    The lattice operations are plain functions held by the class (``domain.join(a, b)``
    binds nothing): a hot loop takes ``join = domain.join`` once and calls it per record.

    Attributes:
        name: ``"int"``, ``"pair"`` or ``"general"``.
        depth: the scope depth whose times these are (``Product`` levels).
        total: the times are totally ordered (ints): ``less_equal`` is ``<=``, and the
            lexicographic order of :class:`Product` is never asked for.
        pairs: the times are ``Product(int, int)`` (one loop), read by index.
        columns: int64 columns per time in a columnar batch (1 for ints, 2 for pairs), or
            ``None``: the times stay Python objects.
        kernels: numpy kernels over int64 time columns apply to these times.
        loops: the times are a scope's: ``Product(t, i)`` of a time ``t`` of the enclosing
            scope and an int iteration ``i``, down to an int (``False``: any other shape,
            which only the generic lattice reads).
        least: the least time (every coordinate 0).
        count_kernel_min, join_kernel_min: updates a batch must hold, under the ``auto``
            kernel mode, for the counting reductions' kernel (:meth:`count_kernel`) and the
            join's (:meth:`join_kernel`) to take it at these times (``None``: no kernel).
            Each is the size where numpy's fixed cost per call starts to pay at this shape
            of times; the values, and the benchmarks that set them, are indexed in
            :mod:`deltaflow.framework.tuning`.
    """

    name: ClassVar[str]
    total: ClassVar[bool] = False
    pairs: ClassVar[bool] = False
    columns: ClassVar[int | None] = None
    kernels: ClassVar[bool] = False
    count_kernel_min: ClassVar[int | None] = None
    join_kernel_min: ClassVar[int | None] = None

    def __init__(self, depth: int, loops: bool = True) -> None:
        self.depth = depth
        self.loops = loops
        least: Time = 0
        for _ in range(depth):
            least = new_tuple(Product, (least, 0))
        self.least = least

    def __repr__(self) -> str:
        odd = "" if self.loops else ", loops=False"
        return f"{type(self).__name__}(depth={self.depth}{odd})"

    # The lattice: subclasses set these to functions of their shape.
    less_equal: Callable[[Any, Any], bool] = staticmethod(lattice.less_equal)
    join: Callable[[Any, Any], Any] = staticmethod(lattice.join)
    meet: Callable[[Any, Any], Any] = staticmethod(lattice.meet)

    def advance_by(self, time: Time, frontier: Sequence[Time]) -> Time:
        """``time`` compacted to ``frontier`` (see :func:`lattice.advance_by`)."""
        return self.advancer(frontier)(time)

    def advancer(self, frontier: Sequence[Time]) -> Callable[[Time], Time]:
        """``lambda t: advance_by(t, frontier)``, one function for many times."""
        return lattice.advancer(frontier)

    def join_closure(self, times: Iterable[Time]) -> set[Time]:
        """Every join of a non-empty subset of ``times`` (see :func:`lattice.join_closure`)."""
        return lattice.join_closure(times)

    def chain_decomposition(self, times: Iterable[Time]) -> list[list[Time]]:
        """``times`` as ascending chains (see :func:`lattice.chain_decomposition`)."""
        return lattice.chain_decomposition(times)

    # The codec.
    def to_columns(self, times: Sequence[Time], *, own: bool = False) -> np.ndarray | None:
        """``times`` as one int64 array of shape ``(n,)`` (ints) or ``(n, 2)`` (pairs);
        ``None`` when this domain keeps its times as objects, or a coordinate is not a
        Python int within 64 bits: a float, bool or string is refused, never truncated.

        ``own``: the times are the dataflow's own (a state's, saved by a checkpoint: every
        time was admitted as an int at an input), so their classes are not checked again;
        ``struct.pack`` converts them, which still refuses a float, a string or too large
        an int (None), and reads a bool as its int.

        >>> PairDomain().to_columns([Product(1, 2)]).tolist()
        [[1, 2]]
        """
        return None

    def from_columns(self, array: np.ndarray) -> list[Time]:
        """The times of :meth:`to_columns`' array, as Python objects."""
        msg = f"{self!r}: times are not stored as columns"
        raise TypeError(msg)

    def advance_columns(self, times: np.ndarray, frontier: Sequence[Time]) -> np.ndarray | None:
        """``times`` (this domain's columns, as :meth:`to_columns` makes them) advanced to
        ``frontier`` as :meth:`advancer` advances each, in one vectorised step: every
        coordinate is totally ordered, so advancing to a frontier is a maximum with its
        meet. None when the frontier's times do not go into columns (``times`` as they are
        for an empty frontier, as :func:`lattice.advance_by` leaves a time).

        >>> PairDomain().advance_columns(np.array([[0, 5], [3, 0]]), [Product(2, 1)]).tolist()
        [[2, 5], [3, 1]]
        """
        if not frontier:
            return times
        bound = self.to_columns(frontier)
        if bound is None:
            return None
        return np.maximum(times, bound.min(axis=0))  # type: ignore[no-any-return]

    # Which kernel takes a batch: each one's threshold is the domain's (see the class).
    def count_kernel(self, size: int) -> bool:
        """Whether a counting reduction's activation of ``size`` new updates takes its numpy
        kernel (``reduce/columnar.py`` at ints, ``reduce/pair_counts.py`` at pairs): at
        :attr:`count_kernel_min` updates under ``auto``, always or never as the mode forces.

        >>> IntDomain().count_kernel(1), GeneralDomain(2).count_kernel(10**9)
        (False, False)
        """
        least = self.count_kernel_min
        return least is not None and use_kernel(size, threshold=least)

    def join_kernel(self, size: int) -> bool:
        """Whether a join's arriving batch of ``size`` updates may take the numpy kernel
        (``join/kernel.py``): at :attr:`join_kernel_min` updates under ``auto``, always or
        never as the mode forces."""
        least = self.join_kernel_min
        return least is not None and use_kernel(size, threshold=least)


def _int_advancer(frontier: Sequence[int]) -> Callable[[int], int]:
    if not frontier:
        return _identity
    f = min(frontier)
    return lambda t: t if t >= f else f


def _identity(t: Any) -> Any:
    return t


def _int_column(values: Sequence[Any]) -> np.ndarray | None:
    """``values`` as one int64 array when every one is a Python ``int`` within 64 bits,
    else None: a float, bool, string or too large an int is refused, never truncated or
    converted (``numpy.asarray([0, 0.5], dtype=int64)`` alone gives ``[0, 0]``).

    >>> _int_column([3, -1]).tolist(), _int_column([0, 0.5]), _int_column([1, True])
    ([3, -1], None, None)
    """
    # (Counting a list of the classes is cheaper per value than a set of them.)
    if list(map(type, values)).count(int) != len(values):
        return None
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:
        return None


def _packed(flat: Sequence[Any]) -> np.ndarray | None:
    """Ints as one int64 array through ``struct.pack``, which refuses an int beyond 64 bits,
    a float or a string (None) but reads a bool as its int (the callers check classes
    when they must); :data:`tuning.PACK_CHUNK` at a time bounds the temporary tuple of
    arguments.

    >>> _packed([3, -1]).tolist(), _packed([0, 0.5]), _packed([1 << 64])
    ([3, -1], None, None)
    """
    n = len(flat)
    out = np.empty(n, dtype=np.int64)
    step = tuning.PACK_CHUNK
    try:
        for lo in range(0, n, step):
            part = flat[lo : lo + step]
            k = len(part)
            out[lo : lo + k] = np.frombuffer(struct.pack(f"{k}q", *part), dtype=np.int64)
    except struct.error:
        return None
    return out


class IntDomain(TimeDomain):
    """The top scope's times: ``int``, totally ordered.

    >>> d = IntDomain()
    >>> d.less_equal(2, 3), d.join(2, 3), d.meet(2, 3), d.advance_by(1, [4, 6])
    (True, 3, 2, 4)
    """

    name = "int"
    total = True
    columns = 1
    kernels = True
    count_kernel_min = tuning.KERNEL_MIN
    join_kernel_min = tuning.JOIN_KERNEL_MIN

    def __init__(self) -> None:
        super().__init__(0)

    less_equal = staticmethod(operator.le)
    join = staticmethod(max)
    meet = staticmethod(min)

    def advancer(self, frontier: Sequence[Time]) -> Callable[[Time], Time]:
        """The maximum with the frontier's least element (the identity when it is empty)."""
        return _int_advancer(frontier)  # type: ignore[arg-type,return-value]

    def join_closure(self, times: Iterable[Time]) -> set[Time]:
        """A chain is closed under join: the distinct times."""
        return set(times)

    def chain_decomposition(self, times: Iterable[Time]) -> list[list[Time]]:
        """One chain: the distinct times in order."""
        distinct = sorted(set(times))
        return [distinct] if distinct else []

    def to_columns(self, times: Sequence[Time], *, own: bool = False) -> np.ndarray | None:
        """One int64 column; None when a time is not a Python int within 64 bits (a float
        or a bool is refused, never truncated; ``own``: see :meth:`TimeDomain.to_columns`).

        >>> d = IntDomain()
        >>> d.to_columns([0, 0.5]), d.to_columns([0, True]), d.to_columns([0, True], own=True)
        (None, None, array([0, 1]))
        """
        return _packed(times) if own else _int_column(times)

    def from_columns(self, array: np.ndarray) -> list[Time]:
        """Python ints."""
        return array.tolist()  # type: ignore[no-any-return]


def _pair_less_equal(a: Product, b: Product) -> bool:
    return a[0] <= b[0] and a[1] <= b[1]  # type: ignore[no-any-return]


def _pair_join(a: Product, b: Product) -> Product:
    # Return an argument when it is the answer: no new Product to build.
    ao, ai = a
    bo, bi = b
    if ao >= bo:
        if ai >= bi:
            return a
        return b if ao == bo else new_tuple(Product, (ao, bi))
    return b if bi >= ai else new_tuple(Product, (bo, ai))


def _pair_meet(a: Product, b: Product) -> Product:
    ao, ai = a
    bo, bi = b
    if ao <= bo:
        if ai <= bi:
            return a
        return b if ao == bo else new_tuple(Product, (ao, bi))
    return b if bi <= ai else new_tuple(Product, (bo, ai))


def _pair_advancer(frontier: Sequence[Product]) -> Callable[[Product], Product]:
    # Each coordinate is totally ordered, so advancing to a frontier is advancing to its meet:
    # a coordinate-wise maximum with it.
    if not frontier:
        return _identity
    if len(frontier) == 1:
        f = frontier[0]
        fo, fi = f
    else:
        fo = min(f[0] for f in frontier)
        fi = min(f[1] for f in frontier)
        f = new_tuple(Product, (fo, fi))

    def advance_pair(t: Product) -> Product:
        o, n = t
        if o >= fo:
            return t if n >= fi else new_tuple(Product, (o, fi))
        return new_tuple(Product, (fo, n)) if n > fi else f

    return advance_pair


class PairDomain(TimeDomain):
    """One loop's times: ``Product(round, iteration)`` of two ints, ordered coordinate-wise.

    >>> d = PairDomain()
    >>> d.less_equal(Product(1, 2), Product(2, 1)), d.meet(Product(1, 2), Product(2, 1))
    (False, Product(outer=1, inner=1))
    >>> d.advance_by(Product(0, 0), [Product(2, 1), Product(1, 4)])
    Product(outer=1, inner=1)
    """

    name = "pair"
    pairs = True
    columns = 2
    kernels = True
    count_kernel_min = tuning.PAIR_KERNEL_MIN
    join_kernel_min = tuning.JOIN_KERNEL_MIN

    def __init__(self) -> None:
        super().__init__(1)

    less_equal = staticmethod(_pair_less_equal)
    join = staticmethod(_pair_join)
    meet = staticmethod(_pair_meet)

    def advancer(self, frontier: Sequence[Time]) -> Callable[[Time], Time]:
        """A coordinate-wise maximum with the frontier's meet."""
        return _pair_advancer(frontier)  # type: ignore[arg-type,return-value]

    def to_columns(self, times: Sequence[Time], *, own: bool = False) -> np.ndarray | None:
        """Two int64 columns, ``(outer, inner)``; None when a coordinate is not a Python int
        within 64 bits (a float or a bool is refused, never truncated; ``own``: see
        :meth:`TimeDomain.to_columns`). The coordinates are read in one flat list, their
        classes checked in one pass; from :data:`tuning.PAIR_PACK_MIN` times ``struct.pack``
        converts them, below it ``numpy.asarray`` (its fixed cost is the smaller).

        >>> PairDomain().to_columns([Product(1, 2), Product(3, 0.5)]) is None
        True
        """
        n = len(times)
        try:
            flat = list(chain.from_iterable(times))  # type: ignore[arg-type]
        except TypeError:  # a time that is no pair (an int): not this domain's
            return None
        if len(flat) != 2 * n:
            return None
        if own:
            ints = _packed(flat)
        elif n < tuning.PAIR_PACK_MIN:
            ints = _int_column(flat)
        elif list(map(type, flat)).count(int) != 2 * n:
            return None
        else:
            ints = _packed(flat)
        return None if ints is None else ints.reshape(n, 2)

    def from_columns(self, array: np.ndarray) -> list[Time]:
        """Products of Python ints."""
        return list(map(new_tuple, repeat(Product), array.tolist()))


class GeneralDomain(TimeDomain):
    """Nested loops' times (``Product(Product(t, i), j)`` and deeper), or any other shape:
    the generic lattice of :mod:`deltaflow.framework.lattice`, times kept as objects.

    >>> d = GeneralDomain(2)
    >>> d.least
    Product(outer=Product(outer=0, inner=0), inner=0)
    >>> d.join(Product(Product(0, 3), 1), Product(Product(1, 0), 0))
    Product(outer=Product(outer=1, inner=3), inner=1)
    """

    name = "general"


INT = IntDomain()
PAIR = PairDomain()
_GENERAL: dict[tuple[int, bool], GeneralDomain] = {}


def domain_for_depth(depth: int) -> TimeDomain:
    """The domain of a scope ``depth`` loops deep: ints at 0, pairs at 1, general deeper.

    >>> [domain_for_depth(d).name for d in range(3)]
    ['int', 'pair', 'general']
    """
    if depth == 0:
        return INT
    if depth == 1:
        return PAIR
    return _general(depth, True)


def _general(depth: int, loops: bool) -> GeneralDomain:
    found = _GENERAL.get((depth, loops))
    if found is None:
        found = _GENERAL[depth, loops] = GeneralDomain(depth, loops)
    return found


def domain_of(time: Time) -> TimeDomain:
    """The domain of times shaped like ``time`` (a trace made from a lower bound alone):
    a scope's when ``time`` nests ``Product(t, int)`` down to an int, else an odd general one.

    >>> domain_of(Product(0, 0)).name, domain_of(Product(Product(0, 0), 0)).name
    ('pair', 'general')
    >>> domain_of(Product(0, Product(0, 0)))
    GeneralDomain(depth=1, loops=False)
    """
    levels = 0
    t = time
    while t.__class__ is Product:
        if t[1].__class__ is not int:
            return _general(lattice.depth(time), False)
        t = t[0]
        levels += 1
    if t.__class__ is not int:
        return _general(levels, False)
    return domain_for_depth(levels)
