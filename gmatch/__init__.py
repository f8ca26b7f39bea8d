"""gMatch (PVLDB 2026): not implemented yet.

This package will hold the RI order with symmetry breaking (``plan.py``), the fine-grained warp DFS
with shared-memory stacks and batch exploration (``kernels.py``) and the seed pool with work
stealing (``balance.py``). No engine named ``gmatch`` is registered until then.
"""
