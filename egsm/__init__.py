"""EGSM (SIGMOD 2023): not implemented yet.

This package will hold the 3-step filter (``filter.py``), the Cuckoo trie candidate index
(``cuckoo_trie.py``), the adaptive order (``order.py``) and the hybrid BFS-DFS enumeration under a
memory budget (``enumerate.py``). No engine named ``egsm`` is registered until then.
"""
