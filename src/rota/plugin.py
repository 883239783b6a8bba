"""The feature seam, for feature authors: a Feature plugs into an App and contributes what
it needs (its store over the dialect seam, its services, its claim strategies, its API
namespace, the CLI commands and HTTP routes the interfaces mount). The classes are
defined beside the App that keeps the registry (rota.app); this is where to import them."""

from rota.app import Feature, ServiceContext
from rota.payload import ArgsSealer

__all__ = ["ArgsSealer", "Feature", "ServiceContext"]
