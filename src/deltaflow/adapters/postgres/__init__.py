"""PostgreSQL in and out: a change-data-capture source (:mod:`.source`) and an exactly-once
sink (:mod:`.sink`), over psycopg 3 (``pip install deltaflow[postgres]``)."""
