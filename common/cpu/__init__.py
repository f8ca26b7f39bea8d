"""CPU engines: the reference matcher every count is checked against (:mod:`.reference`) and the
peer engines over networkx and igraph (:mod:`.peers`)."""
