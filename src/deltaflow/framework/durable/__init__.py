"""Durable state: what a checkpoint stores, and where.

* :mod:`.columns` — Python values as typed Arrow columns and back;
* :mod:`.tables` — the shapes operator state takes (:class:`~.tables.Rows`,
  :class:`~.tables.Groups`), their Arrow record batches, and routing rows to workers;
* :mod:`.store` — a checkpoint directory: data files of segments, manifests switched
  atomically, reading back with every byte checked;
* :mod:`.manifest` — a manifest sealed with its own checksum, and its fields checked;
* :mod:`.lock` — one job per location: an OS lock, or a lease on object stores;
* :mod:`.code` — digests of the code operators run, stable across processes and runs.

Pure Python and Arrow; nothing here knows about trio or the runtime. pyarrow is imported when
state is first written or read.
"""
