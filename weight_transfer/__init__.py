"""The suite's own weight-transfer backend (engine side, loaded into vLLM) and the trainer side that feeds it."""
