"""Built-in environments, each with a seeded task generator (``generate(rng)``)."""
