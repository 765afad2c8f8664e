"""The fault matrix's parts (tests/unit/test_fault_matrix.py), apart so that each reads alone: how a fault
is placed at a call point (`injector`), what must hold afterwards (`oracle`), and the ten scenarios that
make the calls (`workloads`)."""
