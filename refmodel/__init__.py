"""The reference model of the lifecycle contract: a pure state machine, one per contract profile."""
