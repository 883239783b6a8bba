"""The app the chaos run's workers load: the Seatlark shop's, with the poison jobs of
bench/chaos_poison.py added."""

from bench.chaos_poison import register
from examples.seatlark.shop import app

register(app)

__all__ = ["app"]
