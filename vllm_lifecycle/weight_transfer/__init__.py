"""The suite's weight-transfer backend (engine side, loaded into vLLM) and the trainer that feeds it."""
