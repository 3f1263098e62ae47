"""What is measured beside the tokens: memory and its guard, host CPU, the client's own load, server counters, the
hardware."""
