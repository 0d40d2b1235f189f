"""`deuteron.runtime` (Helion's `helion.runtime`): Config, Kernel and kernel under the module
path Helion's programs import them from; the settings module answers the backend query some
examples branch on."""
from ..config import Config  # noqa: F401
from ..kernel import Kernel, kernel  # noqa: F401
from . import settings  # noqa: F401
