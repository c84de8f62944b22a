"""One Rally driver: the Rally home, ``rally task start`` and the env it runs on."""
