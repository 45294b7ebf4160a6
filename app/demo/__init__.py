"""`prtriage demo`: the App end to end on this machine, and the local GitHub it talks to (also the fake
GitHub of the tests)."""
