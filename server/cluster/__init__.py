"""Many nodes, one service (``--redis-url``): see ``server.cluster.node``."""
