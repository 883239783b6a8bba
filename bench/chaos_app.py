"""The app the chaos run's workers load: the Seatlark shop's, with the poison jobs of
bench/chaos_poison.py and the long jobs of the rescue phase (bench/chaos_rescue.py) added."""

from bench import chaos_poison, chaos_rescue
from examples.seatlark.shop import app

chaos_poison.register(app)
chaos_rescue.register(app)

__all__ = ["app"]
