"""Programs with loops and repeated blocks: IR, op catalogue, strategies, codegen."""
