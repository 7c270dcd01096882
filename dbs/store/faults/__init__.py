"""The store's own faults: they drive its admin tools, its masters, tablets and Raft configurations.
`packages.entries()` lists them for the nemesis registry (nemesis.api.OffersNemeses)."""
