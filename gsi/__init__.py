"""GSI (ICDE 2020) and SGSI (TKDE 2022): not implemented yet.

This package will hold the signature filter (``filter.py``), the partitioned CSR (``pcsr.py``),
the join order of Algorithm 2 (``order.py``), the Prealloc-Combine vertex join (``join.py``),
the 4-layer load balance (``balance.py``) and SGSI's out-of-core pipeline (``sgsi.py``).
No engine named ``gsi`` or ``sgsi`` is registered until then.
"""
