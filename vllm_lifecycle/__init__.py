"""What the conformance suite puts into vLLM's own processes: the fault plugin (`faults`) and the
suite's weight-transfer backend (`weight_transfer`), both loaded through vLLM's
`vllm.general_plugins` entry points. The only name installing the suite adds to an environment;
the tests and their harness run from the checkout."""
