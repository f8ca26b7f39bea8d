"""Graph data: the CSR graph model (:mod:`.model`), file formats (:mod:`.io`), generators
(:mod:`.generate`), networkx/scipy conversions (:mod:`.interop`), and the host helpers the
engines share over sorted ranges, vertex bitmasks and root ranges. Imports nothing else of gpusm
but :mod:`common.errors`."""
