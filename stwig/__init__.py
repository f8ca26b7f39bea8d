"""GPU STwig (Lin et al. 2014): not implemented yet.

This package will hold the STwig decomposition and exploration, the right-deep pipelined GPU hash
join, and the CPU STwig baseline. No engine named ``stwig`` is registered until then.
"""
